"""`perflab run all`: every lab headless, then one HTML page of verdicts and plots."""

from __future__ import annotations

import base64
import datetime as dt
import html
import importlib.util
import io
from pathlib import Path

from .errors import PerflabError
from .formatting import inline_html
from .manifest.labs import available, find, labs
from .paths import results_dir
from .results import write_atomic
from .verdict import COLOURS, Verdict


def run_all(cpus=None, quick=True, runs=None, wait=True, progress=True) -> tuple[list[Verdict], Path]:
    """Run every lab of this version; a lab that cannot run here becomes a cannot-show verdict."""
    verdicts = []
    for name in available():
        lab = find(name).load()
        try:
            verdicts.append(lab.run(cpus=cpus, quick=quick, runs=runs if lab.RUNS else None, progress=progress,
                                    wait=wait))
        except PerflabError as err:
            verdicts.append(Verdict(name, "cannot-show", str(err)))
    return verdicts, write_report(verdicts)


NO_FIGURES = ("no figures: matplotlib is not installed here. The course's guests leave drawing to the host: "
              "there, <code>perflab run LAB --vm PROFILE</code> runs a lab in the guest and brings its results back")


def can_draw() -> bool:
    """Whether matplotlib is installed: the course's guests measure, the host draws."""
    return importlib.util.find_spec("matplotlib") is not None


def _png(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode()


def _lab_section(verdict: Verdict) -> str:
    lab = find(verdict.lab)
    colour = COLOURS[verdict.verdict]
    parts = [
        f"<section><h2>{html.escape(lab.heading)}</h2>",
        f'<p class="verdict" style="background:{colour}">{verdict.verdict}</p>',
        f"<p>{inline_html(verdict.reason)}</p>",
    ]
    if verdict.notes:
        parts.append("<ul>" + "".join(f"<li>{inline_html(n)}</li>" for n in verdict.notes) + "</ul>")
    if can_draw():
        for title, figure in lab.load().figures(verdict):
            parts.append(f'<figure><img alt="{html.escape(title)}" src="data:image/png;base64,{_png(figure)}">'
                         f"<figcaption>{html.escape(title)}</figcaption></figure>")
    else:
        parts.append(f"<p class=small>{NO_FIGURES}</p>")
    if verdict.results:
        parts.append(f"<p class=small>results: <code>{html.escape(verdict.results)}</code></p>")
    return "\n".join(parts) + "</section>"


def write_report(verdicts: list[Verdict]) -> Path:
    """Write results/report-<time>.html atomically and return its path."""
    planned = [lab for lab in labs() if not lab.ready]
    now = dt.datetime.now(dt.timezone.utc)
    body = "\n".join(_lab_section(v) for v in verdicts)
    if planned:
        body += "<section><h2>Not in this version yet</h2><ul>" + "".join(
            f"<li>{html.escape(lab.heading)}</li>" for lab in planned) + "</ul></section>"
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>perflab report {now:%Y-%m-%d %H:%M} UTC</title>
<style>body{{font-family:sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;line-height:1.45}}
.verdict{{display:inline-block;color:white;padding:.2rem .6rem;border-radius:.3rem;font-weight:bold}}
img{{max-width:100%}} .small{{font-size:.85rem;color:#555}}
section{{border-top:1px solid #ddd;margin-top:1.5rem}}</style>
</head><body><h1>perflab report</h1><p class=small>{now:%Y-%m-%d %H:%M} UTC</p>
{body}
</body></html>
"""
    folder = results_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"report-{now:%Y%m%dT%H%M%SZ}.html"
    write_atomic(path, page)
    return path
