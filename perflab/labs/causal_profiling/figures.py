"""Lab 7's pictures: perf's ranking beside coz's, causal speedup curves, predicted against measured (drawn, and
as the table the notebook prints)."""

from __future__ import annotations

from typing import Any

from ... import formatting
from ...verdict import Verdict
from . import coz
from .profilers import FUNCTIONS, function_at
from .run import POINT, SOURCE
from .samples import read_sample


def curves_figure(profile: coz.Profile, point: str, lines: list[str], label_of=coz.short_location):
    """Causal speedup curves: predicted program speedup against the line's virtual speedup, 95% CIs."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import PercentFormatter

    figure, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    all_curves = coz.curves(profile, point)
    for line in lines:
        estimates = all_curves.get(line, [])
        if not estimates:
            continue
        x = [e.speedup for e in estimates]
        y = [e.value for e in estimates]
        errors = [[e.value - e.low for e in estimates], [e.high - e.value for e in estimates]]
        ax.errorbar(x, y, yerr=errors, marker="o", capsize=3, label=f"{label_of(line)} "
                    f"({sum(e.experiments for e in estimates)} exp.)")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("line's virtual speedup")
    ax.set_ylabel("program speedup (time saved per visit)")
    ax.xaxis.set_major_formatter(PercentFormatter(1))
    ax.yaxis.set_major_formatter(PercentFormatter(1))
    ax.legend(fontsize=8)
    return figure


def rankings_figure(perf: list[dict[str, Any]], coz_ranking: list, source: str):
    """perf's share of samples beside coz's causal impact, for the program's functions."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import PercentFormatter

    shares = {r["symbol"]: r["share"] for r in perf}
    impacts = {function_at(source, line): value for line, value in coz_ranking}
    figure, (left, right) = plt.subplots(1, 2, sharey=True, figsize=(8, 3), layout="constrained")
    names = list(FUNCTIONS)
    left.barh(names, [shares.get(n, 0) for n in names], color="tab:orange")
    left.set_title("perf: share of CPU samples", fontsize=10)
    right.barh(names, [impacts.get(n, 0) for n in names], color="tab:blue")
    right.set_title("coz: mean predicted program speedup", fontsize=10)
    right.axvline(0, color="grey", lw=0.8)
    for ax in (left, right):
        ax.xaxis.set_major_formatter(PercentFormatter(1))
    left.invert_yaxis()
    return figure


def comparison_figure(rows: list[dict[str, Any]]):
    """coz's prediction and the measured time saved, per pick, with 95% CIs."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import PercentFormatter

    figure, ax = plt.subplots(figsize=(7, 1.4 + 0.8 * len(rows)), layout="constrained")
    for i, row in enumerate(rows):
        for offset, key, colour in ((-0.12, "predicted", "tab:blue"), (0.12, "actual", "tab:green")):
            v = row[key]
            if v is None:
                continue
            ax.errorbar(
                [v["value"]],
                [i + offset],
                xerr=[[v["value"] - v["low"]], [v["high"] - v["value"]]],
                fmt="o",
                color=colour,
                capsize=4,
                label={"predicted": "coz predicted", "actual": "measured"}[key] if i == 0 else None,
            )
    ax.set_yticks(range(len(rows)), [f"halve {r['function']}\n({r['pick']}'s pick)" for r in rows])
    ax.axvline(0, color="grey", lw=0.8)
    ax.xaxis.set_major_formatter(PercentFormatter(1))
    ax.set_xlabel("time saved per batch")
    ax.legend(fontsize=8)
    return figure


def figures(verdict: Verdict) -> list[tuple[str, Any]]:
    """perf beside coz, coz's curves for commit.c, and the predictions beside the race."""
    result = verdict.result
    if result is None:
        return []
    source = SOURCE.read_text()
    profile = coz.parse(result["coz_profile"])
    lines = sorted({e.selected for e in profile.experiments if function_at(source, e.selected) in FUNCTIONS})
    shown = [("perf's ranking beside coz's", rankings_figure(result["perf"], result["coz_ranking"], source)),
             ("coz's causal speedup curves for commit.c", curves_figure(
                 profile, POINT, lines, lambda line: f"{function_at(source, line)} ({coz.short_location(line)})"))]
    if result["comparison"]:
        shown.append(("Halving each pick's work: predicted against measured", comparison_figure(result["comparison"])))
    return shown


def sample_figure(name: str, top: int = 4):
    """The causal speedup curves of a shipped sample profile's top lines."""
    profile = read_sample(name)
    point = profile.points()[0]
    lines = [line for line, _ in coz.rank_lines(profile, point, min_experiments=20)[:top]]
    return curves_figure(profile, point, lines)


def table_text(rows: list[dict[str, Any]]) -> str:
    """Predicted against actual, as the notebook and the CLI print it."""
    def interval(v: dict[str, float] | None) -> str:
        return "no experiments near 50%" if v is None else f"{v['value']:+.1%} ({v['low']:+.1%} to {v['high']:+.1%})"

    header = [("pointed to by", "function (line)", "coz predicted", "measured", "held?")]
    return formatting.table(header + [(r["pick"], f"{r['function']} (commit.c:{r['line']})", interval(r["predicted"]),
                                  interval(r["actual"]), {True: "yes", False: "no", None: "-"}[r["held"]])
                                 for r in rows])
