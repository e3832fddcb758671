"""A learner's first clicks, in a real browser: JupyterLab started as `make lab` starts it, driven by Playwright
with Debian's Chromium. A failing test leaves a screenshot in build/browser-screenshots/."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest
from playwright.sync_api import expect, sync_playwright

from conftest import REPO

CHROMIUM = shutil.which("chromium")
SCREENSHOTS = REPO / "build" / "browser-screenshots"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed: `make test` installs it"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _makefile_lab_arguments() -> list[str]:
    """The JupyterLab options of `make lab`, read from the Makefile so that this test starts what a learner starts."""
    recipe = re.search(r"^lab:.*?\n((?:\t.*\n)+)", (REPO / "Makefile").read_text(), re.M).group(1)
    return [a for a in re.findall(r"--[\w.]+=\S+|--[\w-]+", recipe.replace("\\\n", " ")) if "$(" not in a]


@pytest.fixture(scope="module")
def jupyter(tmp_path_factory):
    """JupyterLab on a free port, its root a fresh folder: the learner's workspace and progress live there."""
    root = tmp_path_factory.mktemp("jupyter-root")
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "PERFLAB_WORKSPACE": str(root / "work"), "PERFLAB_RESULTS": str(root / "results"),
           "PERFLAB_LOCK": str(root / "measure.lock"), "PERFLAB_QUICK": "1",
           "JUPYTERLAB_WORKSPACES_DIR": str(root / ".lab-workspaces")}  # no tabs left open by an earlier run
    env.pop("PERFLAB_PROGRESS", None)  # progress in the workspace, as for a learner
    # A learner who solved the harmonic-mean exercise: their copy is the reference solution.
    (root / "work" / "exercises" / "01-core-to-core").mkdir(parents=True)
    shutil.copy(REPO / "solutions" / "01-core-to-core" / "harmonic-mean.ipynb",
                root / "work" / "exercises" / "01-core-to-core" / "harmonic-mean.ipynb")
    server = subprocess.Popen(
        [str(REPO / ".venv" / "bin" / "jupyter"), "lab", f"--port={port}", "--allow-root",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         *[a for a in _makefile_lab_arguments() if not a.startswith(("--port", "--ServerApp.root_dir"))]],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("JupyterLab did not answer within 120 s")
        yield base, token, root
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:  # a kernel still measuring: do not wait for it
            server.kill()
            server.wait()


@pytest.fixture
def page(request):

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        context.set_default_timeout(60_000)
        tab = context.new_page()
        yield tab
        for old in SCREENSHOTS.glob(f"{request.node.name}-*.png"):
            old.unlink()
        if getattr(request.node, "report_call", None) is None or request.node.report_call.failed:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            for n, open_page in enumerate(context.pages):
                open_page.screenshot(path=SCREENSHOTS / f"{request.node.name}-{n}.png", full_page=True)
                # CI keeps the log, not the screenshots: print what the learner would have seen
                tabs = open_page.locator(".lm-TabBar-tab").all_inner_texts()
                notebook = open_page.locator(".jp-NotebookPanel:visible")
                shown = (notebook if notebook.count() else open_page.locator("body")).first.inner_text()
                print(f"page {n}: {open_page.url}\ntabs: {[t for t in tabs if t]}\n{shown[-4000:]}")
        browser.close()


def test_the_book_opens_from_the_landing_page_styled_with_sidebar_and_search(jupyter, page):
    base, token, _ = jupyter
    page.goto(f"{base}/?token={token}")
    assert page.url.startswith(f"{base}/perflab/"), "JupyterLab does not open on the landing page"
    page.get_by_role("link", name="Read the book").click()
    page.wait_for_url(f"{base}/perflab/book/index.html")
    sidebar = page.locator("#sidebar")
    expect(sidebar, "the book's sidebar is not shown: its CSS or JavaScript did not load").to_be_visible()
    assert page.evaluate("getComputedStyle(document.querySelector('#sidebar')).position") == "fixed"
    sidebar.get_by_role("link", name=re.compile("Core numbers lie about distance")).click()
    page.wait_for_url(re.compile(r".*/perflab/book/labs/01-core-to-core\.html"))
    page.locator("#search-toggle").click()
    page.wait_for_load_state("networkidle")  # the search index arrives after the page
    page.locator("#searchbar").press_sequentially("harmonic")
    expect(page.locator("#searchresults a").first, "the book's search found nothing for 'harmonic'").to_be_visible(
        timeout=30_000)
    page.keyboard.press("Escape")
    page.get_by_role("link", name="your copy").click()  # the chapter links the learner's copy of the notebook
    page.wait_for_url(re.compile(r".*/lab/tree/work/labs/01-core-to-core/lab\.ipynb"))
    page.locator(".jp-Notebook").wait_for()
    expect(page.locator(".jp-Notebook")).to_contain_text("Read the chapter first")
    with page.context.expect_page() as opened:  # and the notebook links its chapter, in a new tab
        page.locator(".jp-Notebook").get_by_role("link", name="book, lab 1").click()
    opened.value.wait_for_url(re.compile(r".*/perflab/book/labs/01-core-to-core\.html"))
    expect(opened.value.locator("#sidebar")).to_be_visible()


def test_a_chapter_opens_on_its_own_from_a_bookmark_or_another_sites_link_but_not_logged_out(jupyter, page):
    """A bookmark or a typed URL sends no Referer, a link from another site a foreign one: Jupyter's file handler
    refuses both (403, "Blocking request from unknown origin"). The book opens either way, but only logged in."""
    from perflab.manifest.labs import find

    base, token, _ = jupyter
    lab = find("first-core-ipi")
    chapter = f"{base}/perflab/book/{lab.chapter.removesuffix('.md')}.html"
    page.goto(f"{base}/?token={token}")  # logs in: the token becomes the session's cookie
    for referer in (None, "https://example.org/notes.html"):
        tab = page.context.new_page()
        response = tab.goto(chapter, referer=referer)
        assert response.status == 200, f"Referer {referer}: {response.status} {tab.content()[:300]}"
        expect(tab).to_have_title(re.compile(re.escape(lab.heading)))
        expect(tab.locator("#sidebar"), "the sidebar's CSS or JavaScript did not load").to_be_visible()
        tab.locator("#search-toggle").click()
        tab.locator("#searchbar").press_sequentially("softirq")
        expect(tab.locator("#searchresults a").first, "the search index did not load").to_be_visible(timeout=30_000)
        tab.close()
    logged_out = urllib.request.urlopen(chapter, timeout=30)  # no token, no cookie: sent to the login page
    assert "/login" in logged_out.geturl() and 'id="sidebar"' not in logged_out.read().decode()


def test_lab_one_runs_all_and_shows_its_run_widget(jupyter, page):
    _, _, root = jupyter
    _open_from_the_landing_page_and_run_all(page, jupyter, "Core numbers lie about distance")
    page.locator(".jp-OutputArea-output .widget-button").first.wait_for(timeout=300_000)
    verdict = page.locator(".jp-OutputArea-output", has_text=re.compile("REPRODUCED|INCONCLUSIVE|CANNOT-SHOW",
                                                                           re.I)).first
    verdict.wait_for(timeout=300_000)
    assert (root / "work" / "labs" / "01-core-to-core" / "lab.ipynb").exists()


def test_an_exercise_check_button_grades_and_the_landing_page_shows_it(jupyter, page):
    base, token, root = jupyter
    _open_from_the_landing_page_and_run_all(page, jupyter, "The harmonic mean of your own measurements")
    page.get_by_role("button", name="Check c2c-harmonic-mean").click(timeout=300_000)  # after a measurement
    result = page.locator(".jp-RenderedText", has_text=re.compile(r"c2c-harmonic-mean: (PASSED|INCONCLUSIVE)")).first
    result.wait_for(timeout=300_000)
    progress = (root / "work" / "progress.txt").read_text()
    assert re.search(r"^c2c-harmonic-mean (passed|inconclusive) ", progress, re.M), progress
    page.goto(f"{base}/perflab/")
    expect(page.locator("tr", has_text="c2c-harmonic-mean")).to_contain_text(re.compile("passed|inconclusive"))


def test_the_landing_page_lists_every_lab_and_exercise_from_the_manifests(jupyter):
    from perflab.manifest.exercises import load_manifest
    from perflab.manifest.labs import labs

    base, token, _ = jupyter
    html = urllib.request.urlopen(f"{base}/perflab/?token={token}", timeout=30).read().decode()
    for lab in labs():
        assert lab.title.replace("'", "&#x27;") in html
        assert (f'href="/lab/tree/work/{lab.folder}/lab.ipynb"' in html) == lab.ready
    for exercise in load_manifest().exercises:
        assert f'href="/lab/tree/work/exercises/{exercise.notebook}"' in html


def _open_from_the_landing_page_and_run_all(page, jupyter, link: str) -> None:
    """Open a notebook from the landing page in a JupyterLab with no tabs restored, and run all its cells.

    An earlier test's notebook restored next to this one could take the focus, and Run All would run it instead."""
    base, token, root = jupyter
    shutil.rmtree(root / ".lab-workspaces", ignore_errors=True)
    page.goto(f"{base}/?token={token}")
    notebook_link = page.get_by_role("link", name=link)
    file_name = notebook_link.get_attribute("href").rsplit("/", 1)[-1]
    notebook_link.click()
    expect(page.locator(".lm-TabBar-tab.lm-mod-current", has_text=file_name).first).to_be_visible(timeout=60_000)
    page.locator(".jp-Notebook .jp-Cell").first.wait_for()
    _run_all_cells(page)


def _run_all_cells(page) -> None:
    """Edit > Clear Outputs of All Cells, then Run > Run All Cells, as a learner does. Cleared, no prompt shows a
    number until a cell has run. Cells sent before the notebook's kernel is connected are dropped without a sign,
    so wait for the kernel, and click again if no cell started."""
    notebook = page.locator(".jp-NotebookPanel:visible")
    page.get_by_role("menuitem", name="Edit", exact=True).click()
    page.get_by_role("menuitem", name=re.compile("^Clear Outputs of All Cells")).click()
    for _ in range(4):
        expect(page.locator(".jp-StatusBar-Widget", has_text="Idle").first).to_be_visible(timeout=120_000)
        dialog = page.locator(".jp-Dialog")
        if dialog.count():  # e.g. "Select Kernel" while the kernel starts: take JupyterLab's default
            dialog.locator(".jp-mod-accept").first.click()
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name=re.compile("^Run All Cells")).click()
        try:
            started = notebook.locator(".jp-InputPrompt", has_text=re.compile(r"\[(\*|\d+)\]")).first
            expect(started).to_be_attached(timeout=15_000)
            return
        except AssertionError:
            continue
    pytest.fail("Run All Cells did not start the notebook's first cell")
