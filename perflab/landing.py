"""The landing page JupyterLab opens on: the book, each lab's notebook, each exercise and where the learner stands.

Labs and exercises come in lab order, each named by its lab's one number, as in the book and `perflab list`.

Made on every request from perflab.overview, so a grade shows up on reload.
Links start at the server's base URL ("/" for `make lab`, "/user/NAME/" under a
workshop's JupyterHub): the book is at <base>perflab/book/, the learner's
notebooks at <base>lab/tree/<path below the server's root>.
"""

from __future__ import annotations

import os
from html import escape
from pathlib import Path

from .overview import exercise_rows, lab_rows

BOOK_PATH = "perflab/book/"  # below the server's base URL: "/" for `make lab`, "/user/NAME/" under JupyterHub

STYLE = """
body { font-family: sans-serif; max-width: 50rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.5; }
h1 { margin-bottom: 0.2rem; } .lead { color: #444; margin-top: 0; }
table { border-collapse: collapse; width: 100%; } td, th { text-align: left; padding: 0.25rem 0.5rem; }
tr + tr { border-top: 1px solid #eee; } .soon { color: #888; }
.status { font-size: 0.85rem; padding: 0.05rem 0.45rem; border-radius: 0.6rem; background: #eee; white-space: nowrap; }
.passed, .reproduced { background: #d7f5dd; } .failed, .not-reproduced { background: #fadcdc; }
.inconclusive { background: #fcefd2; } .cannot-show { background: #e3e8f5; }
code { background: #f3f3f3; padding: 0 0.2rem; } .later { color: #666; }
"""


def notebook_url(notebook: Path, root: Path, base_url: str = "/") -> str:
    try:
        return f"{base_url}lab/tree/" + notebook.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:  # a workspace outside the server's root cannot be opened from here
        return f"{base_url}lab"


def _badge(status: str) -> str:
    return f'<span class="status {escape(status.replace(" ", "-"))}">{escape(status)}</span>'


def where_your_copies_are(learner: str | None) -> str:
    if learner:
        return (f"You are signed in as <b>{escape(learner)}</b>. The notebooks below are your own copies, in "
                "<code>work/</code> in your home, which only you can read: edit them freely; the instructor's "
                "course updates do not touch them.")
    return ("The notebooks below are your own copies (in <code>work/</code>, which git ignores): edit them freely, "
            "<code>git pull</code> brings course updates without touching them.")


def render_html(root: Path, base_url: str = "/") -> str:
    book = base_url + BOOK_PATH
    labs = lab_rows()
    exercises = exercise_rows()
    passed = sum(e.status == "passed" for e in exercises)
    lab_lines = []
    for lab in labs:
        if lab.ready:
            lab_lines.append(
                f'<tr><td>{lab.number}</td><td><a '
                f'href="{notebook_url(lab.notebook, root, base_url)}">{escape(lab.title)}</a></td>'
                '<td><a '
                f'href="{book}{lab.chapter}">chapter</a></td><td>{_badge(lab.last_verdict or "not run")}</td></tr>'
            )
        else:
            lab_lines.append(f'<tr class="soon"><td>{lab.number}</td><td>{escape(lab.title)}</td><td></td>'
                             '<td><span class="status">coming</span></td></tr>')
    learner = os.environ.get("PERFLAB_LEARNER")  # set for each learner's server by a workshop's hub
    cli = "perflab" if learner else ".venv/bin/perflab"  # the course's tools are first on a learner's PATH
    exercise_lines = [
        f'<tr><td>{e.lab_number}</td><td><a href="{notebook_url(e.notebook, root, base_url)}">{escape(e.title)}</a>'
        f'</td><td><code>{escape(e.name)}</code></td><td>{_badge(e.status)}'
        + (f' <small class="later">{escape(e.later)}</small>' if e.later else "") + '</td></tr>' for e in exercises]
    return f"""<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>perflab: CPU and OS performance, on your own machine</title>
<style>{STYLE}</style></head>
<body>
<h1>perflab</h1>
<p class="lead">CPU and OS performance phenomena, made to happen on this machine, measured, and judged.</p>
<h2>Start here</h2>
<p><a href="{book}index.html">Read the book</a>: how the course works, then one chapter per lab.
{where_your_copies_are(learner)}</p>
<h2>Labs</h2>
<table><tr><th>#</th><th>notebook</th><th>book</th><th>last verdict here</th></tr>
{chr(10).join(lab_lines)}
</table>
<h2>Exercises <small>({passed} of {len(exercises)} passed)</small></h2>
<table><tr><th>lab</th><th>notebook</th><th>name</th><th>status</th></tr>
{chr(10).join(exercise_lines)}
</table>
<p>Grade with the notebook's <b>Check</b> button, or in a <a href="{base_url}lab">JupyterLab terminal</a>:
<code>{cli} grade NAME</code>. A pass stays passed; later grades are listed beside it.
<code>{cli} list</code> shows this page as text,
<code>perflab hint NAME</code> gives a hint, <code>perflab reset NAME</code> a fresh copy (yours is kept in
<code>work/.backup/</code>; it asks whether to clear the exercise's progress too). Reload this page to see a new
grade.</p>
<p><a href="{base_url}lab">Open JupyterLab</a> to browse every file.</p>
</body>
</html>
"""
