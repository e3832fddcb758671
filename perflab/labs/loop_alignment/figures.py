"""Lab 6's pictures and panels: the sweep with its boundaries, a loop's bytes on 64-byte lines, a build panel, the
seed's talk replayed."""

from __future__ import annotations

import shutil
from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ... import stats
from ...plots import distributions
from ...sequential import Race
from ...verdict import Verdict
from . import layout, recorded
from .builds import SEED_BASELINE, SEED_BUILD_DIR, SEED_SOURCE, Variant, build_variant, function_loop, measure_builds
from .run import LAB, samples_by_offset


def sweep_figure(result: dict[str, Any]):
    """Time per iteration against the loop's start offset, with CIs, boundaries drawn, slow offsets marked."""
    import matplotlib.pyplot as plt

    by_offset = samples_by_offset(result["samples"])
    offsets = list(by_offset)
    medians = [stats.median(by_offset[o]) for o in offsets]
    cis = [stats.bootstrap_ci(by_offset[o], stats.median) for o in offsets]
    slow = set(result["classification"]["slow"])
    figure, ax = plt.subplots(figsize=(11, 4))
    for boundary in range(0, offsets[-1] + 2, 16):
        style = {64: ("black", "-", 1.2), 32: ("grey", "--", 0.9)}.get(
            64 if boundary % 64 == 0 else 32 if boundary % 32 == 0 else 16, ("lightgrey", ":", 0.8))
        ax.axvline(boundary, color=style[0], linestyle=style[1], linewidth=style[2], zorder=0)
    crossing = [o for o in offsets if result["layouts"][str(o)]["crosses 64-byte line"]]
    for o in crossing:
        ax.axvspan(o - 0.5, o + 0.5, color="#fde0c5", zorder=0, linewidth=0)
    colours = ["#d62728" if o in slow else "#1f77b4" for o in offsets]
    ax.errorbar(
        offsets,
        medians,
        yerr=[[m - lo for m, (lo, _) in zip(medians, cis)], [hi - m for m, (_, hi) in zip(medians, cis)]],
        fmt="none",
        ecolor="grey",
        elinewidth=0.8,
        zorder=1,
    )
    ax.scatter(offsets, medians, c=colours, s=14, zorder=2)
    ax.set_xlabel("loop start offset (bytes past a 256-byte boundary); lines at 16 (dotted), 32 (dashed), 64 (solid)")
    ax.set_ylabel("ns per iteration (median, 95% CI)")
    ax.set_xlim(offsets[0] - 1, offsets[-1] + 1)
    ax.text(
        0.01,
        0.97,
        f"{result['params']['loop']} loop: red = slow on 3 visits of 4; shaded = the loop crosses a 64-byte line",
        transform=ax.transAxes,
        va="top",
        fontsize=9,
        backgroundcolor="white",
    )
    figure.tight_layout()
    return figure


def layout_figure(loop_description: dict[str, Any]):
    """The loop's bytes drawn on 64-byte lines: one row per line, the 32-byte halves split, the jump in red."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    start = loop_description["start"]
    first_line = start - start % layout.LINE
    last_line = (loop_description["end"] - 1) - (loop_description["end"] - 1) % layout.LINE
    rows = (last_line - first_line) // layout.LINE + 1
    figure, ax = plt.subplots(figsize=(11, 0.9 + 0.7 * rows))
    branch_start = loop_description["branch"][0]
    palette = ["#9ecae1", "#c6dbef"]
    for index, instruction in enumerate(loop_description["instructions"]):
        size = len(instruction["bytes"].split())
        colour = "#fc9272" if instruction["address"] >= branch_start else palette[index % 2]
        for byte in range(size):
            address = instruction["address"] + byte
            row, column = (address - first_line) // layout.LINE, address % layout.LINE
            ax.add_patch(Rectangle((column, -row - 1), 1, 0.8, facecolor=colour, edgecolor="white"))
        row, column = (instruction["address"] - first_line) // layout.LINE, instruction["address"] % layout.LINE
        ax.text(column + 0.1, -row - 0.6, instruction["text"].split()[0], fontsize=7, va="center")
    for row in range(rows):
        ax.text(-1, -row - 0.6, f"{first_line + row * layout.LINE:#x}", ha="right", va="center", fontsize=8)
    ax.axvline(32, color="grey", linestyle="--")
    ax.set_xlim(0, 64)
    ax.set_ylim(-rows - 0.2, 0)
    ax.set_xticks(range(0, 65, 16))
    ax.set_yticks([])
    ax.set_xlabel(f"loop at {start:#x}, {loop_description['size']} bytes (jump in red); "
                  "byte within the 64-byte line (dashed: the 32-byte halves)")
    figure.tight_layout()
    return figure


LAYOUT_COLOURS = {"crosses": "#d62728", "aligned": "#1f77b4"}


def talk_figure() -> Figure:
    """The talk's numbers: one time per build, and VTune's front-end-bound share of each, coloured by layout."""
    found = recorded.replay()
    figure = Figure(figsize=(10, 3.6))
    times, shares = figure.subplots(1, 2, gridspec_kw={"width_ratios": [2, 3]})
    timed = list(found["seconds"])
    times.bar(timed, [found["seconds"][n] for n in timed], color=[LAYOUT_COLOURS[found["layouts"][n]] for n in timed])
    for x, name in enumerate(timed):
        times.annotate(f"{found['seconds'][name]} s", (x, found["seconds"][name]), ha="center", va="bottom", fontsize=8)
    times.set_ylim(0, 1.15 * max(found["seconds"].values()))
    times.set_ylabel("the loop's time, s")
    times.set_title(f"x{found['ratio']:.2f}, from one run of each: no interval", fontsize=9)
    names = list(found["front_end_bound"])
    for x, name in enumerate(names):
        low, high = found["front_end_bound"][name]
        colour = LAYOUT_COLOURS[found["layouts"][name]]
        shares.bar(x, low, color=colour)
        shares.bar(x, high - low, bottom=low, color=colour, alpha=0.4)  # the range the talk gives, if any
        shares.annotate(recorded.share_text(low, high), (x, high), ha="center", va="bottom", fontsize=8)
    shares.set_xticks(range(len(names)), [n.replace(", ", ",\n") for n in names])
    shares.set_ylim(0, 1.5 * max(high for _, high in found["front_end_bound"].values()))
    shares.set_ylabel("front-end-bound slots, % (VTune)")
    shares.legend([Patch(color=c) for c in LAYOUT_COLOURS.values()],
                  [recorded.load()["layouts"][layout_name] for layout_name in LAYOUT_COLOURS], fontsize=8,
                  loc="upper right")
    figure.suptitle("Recorded in the seed's talk, not measured here", fontsize=10)
    figure.tight_layout()
    return figure


def figures(verdict: Verdict) -> list[tuple[str, Any]]:
    """The sweep, the fresh slowest-vs-fastest race, and both loops' byte layouts; where nothing was measured, the
    seed's talk replayed."""
    result = verdict.result
    if result is None:
        return [("The seed's talk, replayed", talk_figure())]
    check = result["confirmation"]
    fast, slow = check["fastest"], check["slowest"]
    raced = Race.from_json(check["race"])
    return [
        ("Time per iteration at each start offset", sweep_figure(result)),
        ("Fresh interleaved run: slowest against fastest offset",
         distributions({f"offset {fast}": raced.kept(str(fast)), f"offset {slow}": raced.kept(str(slow))},
                       "ns per iteration", centre=stats.median, centre_ci=stats.bootstrap_ci, centre_name="median")),
        (f"Offset {fast} (fast)", layout_figure(result["layouts"][str(fast)])),
        (f"Offset {slow} (slow)", layout_figure(result["layouts"][str(slow)])),
    ]


def render_layout(result: dict[str, Any], offset: int) -> str:
    """The text table of one offset's loop, from a saved sweep."""
    return layout.render_lines(_loop_from_description(result["layouts"][str(offset)]))


def _loop_from_description(description: dict[str, Any]) -> layout.Loop:
    return layout.Loop(tuple(layout.Instruction(i["address"], bytes.fromhex(i["bytes"].replace(" ", "")), i["text"])
                             for i in description["instructions"]))


def build_panel():
    """Widgets: pick a compiler, an optimisation level and layout flags; build seed.c; see its loop; race gcc -O2."""
    import ipywidgets as widgets

    from ...notebook import action_button

    compilers = [c for c in ("gcc", "clang") if shutil.which(c)]
    compiler = widgets.Dropdown(options=compilers, value=compilers[0], description="compiler")
    level = widgets.Dropdown(options=["-O0", "-O1", "-O2", "-O3"], value="-O2", description="level")
    extras = {
        flag: widgets.Checkbox(
            value=False, description=label, style={"description_width": "initial"}, layout=widgets.Layout(width="auto")
        )
        for flag, label in (
            ("-DEXTRA_NOP", "one more nop in foo"),
            ("-falign-functions=16", "-falign-functions=16"),
            ("-falign-loops=64", "-falign-loops=64"),
            ("-Wa,-mbranches-within-32B-boundaries", "-Wa,-mbranches-within-32B-boundaries"),
        )
    }
    def build_and_race():
        flags = (level.value, *(flag for flag, box in extras.items() if box.value))
        mine = Variant(f"{compiler.value} {' '.join(flags)}", compiler.value, flags)
        built = {v.name: build_variant(SEED_SOURCE, v, SEED_BUILD_DIR)
                 for v in (Variant(SEED_BASELINE, "gcc", ("-O2",)), mine)}
        print(layout.render_lines(function_loop(built[mine.name], "main")))
        times = measure_builds(built, LAB.QUICK.seed_iterations, LAB.QUICK.seed_runs * 2, LAB.placement_here(),
                               "your build vs gcc -O2")
        for name, values in times.items():
            low, high = stats.bootstrap_ci(values, stats.median)
            print(f"{name:<60} {stats.median(values):.3f} ns/iter (95% CI {low:.3f}-{high:.3f})")

    button, output = action_button("Build and race gcc -O2", build_and_race)
    return widgets.VBox([widgets.HBox([compiler, level]), *extras.values(), button, output])
