"""JupyterLab starts as `make lab` starts it, and headless Chromium loads the landing page."""

from __future__ import annotations

import secrets
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest

from conftest import REPO

CHROMIUM = shutil.which("chromium")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed: `make test` installs it")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def jupyter():
    port, token = _free_port(), secrets.token_hex(16)
    server = subprocess.Popen(
        [str(REPO / ".venv" / "bin" / "jupyter"), "lab", "--ip=127.0.0.1", f"--port={port}", "--no-browser",
         "--allow-root", f"--IdentityProvider.token={token}", "--LabApp.default_url=/files/welcome.html",
         f"--ServerApp.root_dir={REPO}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("JupyterLab did not answer within 60 s")
        yield base, token
    finally:
        server.terminate()
        server.wait(timeout=30)


def _dump_dom(url: str, tmp_path, budget_ms: int = 5000) -> str:
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'chromium'}", f"--virtual-time-budget={budget_ms}", "--dump-dom", url],
        capture_output=True, text=True, timeout=120)
    return done.stdout


def test_landing_page_links_book_labs_and_exercises(jupyter, tmp_path):
    base, token = jupyter
    dom = _dump_dom(f"{base}/?token={token}", tmp_path)
    assert "perflab" in dom and "Core numbers lie about distance" in dom
    for link in ("/files/book/build/index.html", "/lab/tree/labs/01-core-to-core/lab.ipynb",
                 "/lab/tree/exercises/01-core-to-core/harmonic-mean.ipynb"):
        assert link in dom, f"landing page lacks a link to {link}"


def test_jupyterlab_opens_the_lab_notebook(jupyter, tmp_path):
    base, token = jupyter
    dom = _dump_dom(f"{base}/lab/tree/labs/01-core-to-core/lab.ipynb?token={token}", tmp_path, budget_ms=20000)
    assert "jp-Notebook" in dom or "jp-LabShell" in dom, "JupyterLab's shell did not render"


def test_book_is_served(jupyter):
    base, token = jupyter
    if not (REPO / "book" / "build" / "index.html").exists():
        pytest.skip("the book is not built: run `make test`, which builds it")
    page = urllib.request.urlopen(f"{base}/files/book/build/index.html?token={token}", timeout=10).read().decode()
    assert "perflab" in page
