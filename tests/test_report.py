"""`perflab run all --quick` runs every lab headless and writes an HTML report with verdicts and plots."""

from __future__ import annotations

import html
from dataclasses import replace
from pathlib import Path

from perflab import report
from perflab.labs import available, find, labs
from perflab.verdict import Verdict


def test_run_all_quick_writes_the_report(every_lab_quick):
    summary, _ = every_lab_quick
    assert [lab["lab"] for lab in summary["labs"]] == available(), "every ready lab of labs/manifest.toml, in order"
    page = Path(summary["report"]).read_text()
    assert "Core numbers lie about distance" in page and "The same loop, shifted a few bytes" in page
    assert "An inclusive LLC evicts" in page
    assert all(lab["verdict"] in page for lab in summary["labs"])
    assert "data:image/png;base64," in page, "the report embeds the lab's plots"
    assert ("Not in this version yet" in page) == any(not lab.ready for lab in labs())


def test_report_lists_the_planned_labs(tmp_path, monkeypatch):
    """A lab the manifest marks planned is named at the end of the report, not run."""
    monkeypatch.setenv("PERFLAB_RESULTS", str(tmp_path))
    planned = replace(find("numa-static-data"), status="planned")
    monkeypatch.setattr(report, "labs", lambda: [planned])
    page = report.write_report([]).read_text()
    assert "Not in this version yet" in page and f"<li>{html.escape(planned.heading)}</li>" in page


def test_where_matplotlib_is_missing_the_report_says_the_host_draws(tmp_path, monkeypatch):
    """The course's guests have no matplotlib: `perflab run all` in one still writes its report, and says why it
    has no plots."""
    monkeypatch.setenv("PERFLAB_RESULTS", str(tmp_path))
    monkeypatch.setattr(report.importlib.util, "find_spec", lambda name: None if name == "matplotlib" else object())
    verdict = Verdict("core-to-core", "cannot-show", "measured in no guest")
    page = report.write_report([verdict]).read_text()
    assert "measured in no guest" in page and report.NO_FIGURES in page and "data:image/png" not in page
