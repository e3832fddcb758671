"""Lab 6: the same loop, shifted a few bytes, runs much slower.

Sweep one loop's start offset byte by byte (the bytes of the loop never
change), find the slow offsets, confirm the slowest against the fastest in a
fresh interleaved run, and check which boundary the slow offsets have in
common, from objdump's disassembly. Then build the seed's own program with
several compilers and flags and measure the builds side by side.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from .. import layout, results, stats
from ..build import ensure_built
from ..cpulist import check_cpus
from ..errors import PerflabError
from ..lock import measurement_lock
from ..paths import BUILD_DIR, REPO_ROOT
from ..probe import Machine, probe
from ..runner import Config, interleave, run_once
from ..verdict import ALPHA, Verdict, judge_change, unless_emulated

LAB = "loop-alignment"
SOURCE_DIR = "labs/06-loop-alignment"
LOOPS = ("alu", "call")
OFFSETS = range(128)  # two 64-byte lines: the pattern should repeat
# The smallest slowdown of the slowest offset worth calling an effect
# (the seed measured +30%, the issue +42% on a Cascade Lake guest).
MIN_EFFECT = 0.10
# A layout fact "explains" the slow offsets when it agrees with them on this share of offsets.
EXPLAINS = 0.9


@dataclass(frozen=True)
class Settings:
    """How much to measure: loop iterations per sample, sweep rounds, confirmation rounds, seed runs."""

    iterations: int  # loop iterations per timed visit
    rounds: int  # sweep rounds: each visits every offset once
    confirm_rounds: int  # visits of the slowest and the fastest offset in the fresh race
    seed_iterations: int  # iterations per run of each seed.c build
    seed_runs: int  # interleaved runs of the seed.c builds


QUICK = Settings(iterations=300_000, rounds=15, confirm_rounds=15, seed_iterations=10_000_000, seed_runs=5)
FULL = Settings(iterations=1_000_000, rounds=30, confirm_rounds=40, seed_iterations=100_000_000, seed_runs=15)


def settings_for(quick: bool, runs: int | None = None) -> Settings:
    """QUICK or FULL; `runs` sets the sweep's rounds and the seed's runs, and twice as many confirmation rounds."""
    chosen = QUICK if quick else FULL
    return replace(chosen, rounds=runs, confirm_rounds=2 * runs, seed_runs=runs) if runs else chosen


def choose_cpu(machine: Machine, cpus: list[int] | None) -> int:
    """One CPU to pin to: the first one given, else the last online CPU (CPU 0 takes the most interrupts)."""
    if cpus:
        check_cpus(cpus, machine.online_cpus)
        return cpus[0]
    return machine.online_cpus[-1]


def sweep_argv(binary: Path, loop: str, offsets: str, iterations: int, rotation: int, cpu: int) -> list[str]:
    """One round per process: the lab starts a process per round, so the progress bar moves."""
    return [str(binary), "-l", loop, "-o", offsets, "-n", str(iterations), "-s", "1",
            "-r", str(rotation), "-C", str(cpu)]


def loop_layouts(binary: Path, loop: str) -> dict[int, layout.Loop]:
    """Each copy's loop, from objdump: copy N is the function `<loop>_loop_N`."""
    functions = layout.disassemble(binary)
    return {offset: layout.find_loop(functions[f"{loop}_loop_{offset}"]) for offset in OFFSETS}


def samples_by_offset(samples: list[dict[str, Any]]) -> dict[int, list[float]]:
    by_offset: dict[int, list[float]] = {}
    for s in samples:
        by_offset.setdefault(s["offset"], []).append(s["ns_per_iter"])
    return dict(sorted(by_offset.items()))


# ANCHOR: classify
def classify(by_offset: dict[int, list[float]], min_effect: float = MIN_EFFECT) -> dict[str, Any]:
    """Which offsets are slow, and which only sometimes.

    The reference is the most consistently fast offset (lowest 90th
    percentile: fast on 9 visits of 10, not just usually). An offset differs from it when Mann-Whitney U says so at
    ALPHA divided by the number of offsets (Bonferroni: 128 tests must not
    find slow offsets by chance). It is *slow* when even its 25th percentile
    is `min_effect` above the reference's median (slow on 3 visits of 4), and
    *sometimes slow* when only its 75th percentile is.
    """
    medians = {o: stats.median(v) for o, v in by_offset.items()}
    fastest = min(by_offset, key=lambda o: stats.percentile(by_offset[o], 90))
    slowest = max(by_offset, key=lambda o: stats.percentile(by_offset[o], 25))
    limit = medians[fastest] * (1 + min_effect)
    threshold = ALPHA / len(by_offset)
    slow, sometimes = [], []
    for offset, values in by_offset.items():
        if stats.percentile(values, 75) < limit or stats.mann_whitney_u(by_offset[fastest], values)[1] >= threshold:
            continue
        (slow if stats.percentile(values, 25) >= limit else sometimes).append(offset)
    return {"medians": medians, "fastest": fastest, "slowest": slowest, "slow": slow, "sometimes_slow": sometimes}
# ANCHOR_END: classify


# ANCHOR: explain
def explain(slow: list[int], facts: dict[int, dict[str, bool]]) -> list[dict[str, Any]]:
    """For each layout fact, on how many offsets "slow" and "fact is true" agree; best first."""
    slow_set = set(slow)
    names = next(iter(facts.values())).keys()
    ranked = []
    for name in names:
        agree = sum((offset in slow_set) == f[name] for offset, f in facts.items())
        ranked.append({"fact": name, "agree": agree, "of": len(facts), "share": agree / len(facts)})
    return sorted(ranked, key=lambda r: -r["agree"])
# ANCHOR_END: explain


def offset_ranges(offsets: list[int]) -> str:
    """[46, 47, 48, 110] -> '46-48, 110'."""
    spans: list[list[int]] = []
    for o in sorted(offsets):
        if spans and o == spans[-1][1] + 1:
            spans[-1][1] = o
        else:
            spans.append([o, o])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans) or "none"


def measure_offsets(binary: Path, loop: str, offsets: str, cpu: int, iterations: int, rounds: int, desc: str,
                    progress: bool = True, wait: bool = True) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One process per round, each visiting every offset in an order rotated by the round number."""
    samples: list[dict[str, Any]] = []
    meta: dict[str, Any] = {}
    with measurement_lock(f"perflab {LAB} {desc}", wait=wait):
        for r in tqdm(range(rounds), desc=desc, disable=not progress, file=sys.stderr, leave=False):
            meta, found = run_once(sweep_argv(binary, loop, offsets, iterations, r, cpu))
            samples += [dict(s, round=r) for s in found]
    return meta, samples


def sweep(loop: str = "alu", cpu: int | None = None, settings: Settings = QUICK, progress: bool = True,
          wait: bool = True, machine: Machine | None = None) -> dict[str, Any]:
    """Time the loop at every offset, round by round in rotated order; classify and explain. Saved."""
    if loop not in LOOPS:
        raise PerflabError(f"unknown loop {loop!r}: choose one of {', '.join(LOOPS)}")
    machine = machine or probe()
    cpu = choose_cpu(machine, [cpu] if cpu is not None else None)
    binary = ensure_built(SOURCE_DIR, "offset_sweep")
    meta, samples = measure_offsets(binary, loop, f"{OFFSETS[0]}-{OFFSETS[-1]}", cpu, settings.iterations,
                                    settings.rounds, f"{loop} loop, {len(OFFSETS)} offsets", progress, wait)
    by_offset = samples_by_offset(samples)
    layouts = loop_layouts(binary, loop)
    facts = {o: layout.boundary_facts(layouts[o]) for o in by_offset}
    found = classify(by_offset)
    found["medians"] = {str(o): m for o, m in found["medians"].items()}  # JSON keys are strings
    result = results.new_result(LAB, "sweep", machine.summary(), {"loop": loop, "cpu": cpu, **asdict(settings)})
    result.update(meta=meta, samples=samples, layouts={str(o): layout.describe(layouts[o]) for o in by_offset},
                  classification=found, explanation=explain(found["slow"], facts))
    result["path"] = str(results.save(result))
    return result


def confirm(sweep_result: dict[str, Any], settings: Settings, progress: bool = True, wait: bool = True) -> dict[str, Any]:
    """Race the sweep's slowest offset against its fastest in a fresh run: no winner's curse."""
    params = sweep_result["params"]
    fast, slow = sweep_result["classification"]["fastest"], sweep_result["classification"]["slowest"]
    _, samples = measure_offsets(ensure_built(SOURCE_DIR, "offset_sweep"), params["loop"], f"{min(fast, slow)},{max(fast, slow)}", params["cpu"],
                                 settings.iterations, settings.confirm_rounds, f"offset {slow} vs {fast}", progress, wait)
    by_offset = samples_by_offset(samples)
    return {"fastest": fast, "slowest": slow, "ns_per_iter": {str(o): v for o, v in by_offset.items()}}


def rates(ns_per_iter: list[float]) -> list[float]:
    """Iterations per nanosecond: higher is better, as judge_change expects."""
    return [1 / t for t in ns_per_iter]


def pmu_note(machine: Machine) -> str:
    if machine.value("hw_pmu"):
        return ("this machine has a hardware PMU: count the front end's uop sources for a slow and a fast offset with "
                "`perf stat -e idq.dsb_uops,idq.mite_uops,idq.lsd_uops -- build/06-loop-alignment/offset_sweep -o 46 -s 20` "
                "(event names differ between generations: see `perf list frontend`)")
    return ("no hardware PMU here (a VM without a virtual PMU): timing only. On bare metal, `perf stat -e "
            "idq.dsb_uops,idq.mite_uops` on a slow and a fast offset shows where the uops came from")


def run(cpus: list[int] | None = None, quick: bool = False, runs: int | None = None, loop: str = "alu",
        progress: bool = True, wait: bool = True) -> Verdict:
    """The whole lab: sweep, confirm the extremes in a fresh run, explain by layout, verdict. Saves everything."""
    machine = probe()
    settings = settings_for(quick, runs)
    found = sweep(loop, choose_cpu(machine, cpus), settings, progress, wait, machine)
    check = confirm(found, settings, progress, wait)
    slow, fast = check["slowest"], check["fastest"]
    verdict, reason, effect = judge_change(
        f"offset {fast} vs offset {slow}", rates(check["ns_per_iter"][str(slow)]),
        rates(check["ns_per_iter"][str(fast)]), MIN_EFFECT)
    found["confirmation"] = dict(check, verdict=verdict, reason=reason, effect=asdict(effect))
    path = results.update(found)
    classification, best = found["classification"], found["explanation"][0]
    times = {o: stats.median(v) for o, v in check["ns_per_iter"].items()}
    notes = [
        f"{loop} loop on CPU {found['params']['cpu']}: {times[str(fast)]:.3f} ns per iteration at offset {fast}, "
        f"{times[str(slow)]:.3f} ns at offset {slow}: x{times[str(slow)] / times[str(fast)]:.2f} (fresh run, medians)",
        f"slow offsets (>= {MIN_EFFECT:.0%} slower than offset {fast} on 3 visits of 4, significant): "
        f"{offset_ranges(classification['slow'])}",
    ]
    if classification["sometimes_slow"]:
        notes.append(f"slow on some visits only: {offset_ranges(classification['sometimes_slow'])}. The front end "
                     "switched between a fast and a slow way of running the same bytes; on a VM, the host running "
                     "something on this core's other hyperthread is one possible cause (a PMU would tell)")
    if classification["slow"] and best["share"] >= EXPLAINS:
        notes.append(f"they line up with '{best['fact']}': slow where it is true, fast where it is false, on "
                     f"{best['agree']} of {best['of']} offsets (objdump's layout of each copy)")
    elif classification["slow"]:
        notes.append(f"no single boundary explains them; closest: '{best['fact']}' agrees on {best['agree']} of {best['of']} offsets")
    notes += [f"slowest offset: {w}" for w in stats.instability_warnings(check["ns_per_iter"][str(slow)], "ns per iteration")]
    notes += [f"fastest offset: {w}" for w in stats.instability_warnings(check["ns_per_iter"][str(fast)], "ns per iteration")]
    notes.append(pmu_note(machine))
    ratio = f"the slowest offset takes x{1 + effect.value:.2f} the time of the fastest (95% CI x{1 + effect.ci_low:.2f} to x{1 + effect.ci_high:.2f})"
    if verdict == "reproduced":
        reason = f"{ratio}, p = {effect.p_value:.2g}; same bytes, different address"
    elif verdict == "not-reproduced":
        reason = f"{ratio}: no offset is {MIN_EFFECT:.0%} slower here; this core's front end hides the boundaries"
    return unless_emulated(Verdict(LAB, verdict, reason, effect, results=str(path), notes=notes), machine,
                           "an emulated CPU has no front end whose fetch lines or uop cache the offsets could cross")


# --- the seed's program, built many ways -------------------------------------------------------------

@dataclass(frozen=True)
class Variant:
    """One build of a C file: a compiler and its flags."""

    name: str
    compiler: str
    flags: tuple[str, ...]

    @property
    def slug(self) -> str:
        return "".join(c if c.isalnum() else "_" for c in self.name).strip("_")


# ANCHOR: variants
SEED_VARIANTS = (
    Variant("gcc -O0", "gcc", ("-O0",)),
    Variant("gcc -O0, nop in foo", "gcc", ("-O0", "-DEXTRA_NOP")),
    Variant("gcc -O0 -falign-functions=16", "gcc", ("-O0", "-falign-functions=16")),
    Variant("gcc -O2", "gcc", ("-O2",)),
    Variant("gcc -O2, nop in foo", "gcc", ("-O2", "-DEXTRA_NOP")),
    Variant("gcc -O2 -falign-loops=64", "gcc", ("-O2", "-falign-loops=64")),
    Variant("gcc -O2 -Wa,-mbranches-within-32B-boundaries", "gcc", ("-O2", "-Wa,-mbranches-within-32B-boundaries")),
    Variant("clang -O2", "clang", ("-O2",)),
)
# ANCHOR_END: variants
SEED_BASELINE = "gcc -O2"


def build_variant(source: Path, variant: Variant, out_dir: Path) -> Path:
    """Compile `source` as `variant` into out_dir; the flags are recorded in the binary's meta line."""
    if shutil.which(variant.compiler) is None:
        raise PerflabError(f"{variant.compiler} is not installed: run `make lab` (deps/debian.txt lists it)")
    out_dir.mkdir(parents=True, exist_ok=True)
    binary = out_dir / variant.slug
    flags = " ".join(variant.flags)
    argv = [variant.compiler, *variant.flags, "-Wall", "-I", str(REPO_ROOT / "labs"),
            f"-DPERFLAB_CFLAGS=\"{flags}\"", "-o", str(binary), str(source)]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise PerflabError(f"{variant.name} failed to build {source.name}: {done.stderr.strip().splitlines()[-1:]}")
    return binary


def compiler_version(compiler: str) -> str:
    done = subprocess.run([compiler, "--version"], capture_output=True, text=True)
    return done.stdout.splitlines()[0] if done.returncode == 0 and done.stdout else "unknown"


def seed_builds(variants: tuple[Variant, ...] = SEED_VARIANTS) -> tuple[dict[str, Path], list[str]]:
    """Build the seed program every way whose compiler is here; say which were skipped and why."""
    built, skipped = {}, []
    for variant in variants:
        if shutil.which(variant.compiler) is None:
            skipped.append(f"{variant.name}: {variant.compiler} is not installed (deps/debian.txt lists it; run `make lab`)")
            continue
        built[variant.name] = build_variant(REPO_ROOT / SOURCE_DIR / "seed.c", variant, BUILD_DIR / "06-loop-alignment" / "seed")
    return built, skipped


def measure_builds(built: dict[str, Path], iterations: int, runs: int, cpu: int, desc: str,
                   progress: bool = True, wait: bool = True) -> dict[str, list[float]]:
    """ns per iteration of each build, the builds interleaved run by run, all pinned to one CPU."""
    configs = [Config(name, ["taskset", "-c", str(cpu), str(binary), str(iterations)]) for name, binary in built.items()]
    with measurement_lock(f"perflab {LAB} {desc}", wait=wait):
        runs_by_build = interleave(configs, runs, desc=desc, progress=progress)
    return {name: run.values("ns_per_iter") for name, run in runs_by_build.items()}


def function_loop(binary: Path, function: str) -> layout.Loop:
    """The innermost loop of one function of a binary, from objdump."""
    return layout.find_loop(layout.disassemble(binary, [function])[function])


def seed_side_by_side(cpu: int | None = None, settings: Settings = QUICK, progress: bool = True,
                      wait: bool = True) -> dict[str, Any]:
    """The seed program, every build in one interleaved run, with each build's loop layout. Saved."""
    machine = probe()
    cpu = choose_cpu(machine, [cpu] if cpu is not None else None)
    built, skipped = seed_builds()
    layouts = {name: layout.describe(function_loop(binary, "main")) for name, binary in built.items()}
    times = measure_builds(built, settings.seed_iterations, settings.seed_runs, cpu, f"{len(built)} builds of seed.c",
                           progress, wait)
    result = results.new_result(LAB, "seed", machine.summary(), {"cpu": cpu, **asdict(settings)})
    result.update(layouts=layouts, ns_per_iter=times, skipped=skipped,
                  compilers={c: compiler_version(c) for c in sorted({v.compiler for v in SEED_VARIANTS}) if shutil.which(c)})
    result["path"] = str(results.save(result))
    return result


# --- the exercise: a slow build to fix with flags only ---------------------------------------------------

EXERCISE_SOURCE = REPO_ROOT / SOURCE_DIR / "checksum.c"
EXERCISE_FUNCTION = "checksum"
EXERCISE_BUILD_DIR = BUILD_DIR / "06-loop-alignment" / "exercise"
# Alignment off, so PADDING alone decides where the loop starts.
EXERCISE_FLAGS = ("-O2", "-fno-align-loops", "-fno-align-jumps", "-fno-align-labels")
# Flags that move code without changing what it computes: the only fixes the exercise accepts.
LAYOUT_FLAG_PREFIXES = ("-falign-", "-fno-align-", "-Wa,-mbranches-within-32B-boundaries", "-Wa,-malign-branch",
                        "-DPADDING=")


# ANCHOR: slow_build
def exercise_slow_build(compiler: str = "gcc") -> Variant:
    """The build of checksum.c whose loop-closing jump straddles a 64-byte line, for this compiler.

    Build once without padding, see where the jump lands, and pad so that it
    starts on the last byte of a line; then check the result in objdump.
    """
    plain = Variant(f"{compiler}, no padding", compiler, EXERCISE_FLAGS)
    jump = function_loop(build_variant(EXERCISE_SOURCE, plain, EXERCISE_BUILD_DIR), EXERCISE_FUNCTION).branch
    padding = (layout.LINE - 1 - jump.address) % layout.LINE
    slow = Variant(f"{compiler}, slow build", compiler, EXERCISE_FLAGS + (f"-DPADDING={padding}",))
    loop = function_loop(build_variant(EXERCISE_SOURCE, slow, EXERCISE_BUILD_DIR), EXERCISE_FUNCTION)
    if not layout.crosses(loop.branch.address, loop.branch.end, layout.LINE):
        raise PerflabError(f"{compiler} laid out checksum.c differently than expected (jump at {loop.branch.address:#x}); "
                           "report this with `perflab probe --json` and your compiler version")
    return slow
# ANCHOR_END: slow_build


def with_fix(slow: Variant, fix_flags: list[str]) -> Variant:
    """The slow build with the learner's flags appended (later flags win)."""
    return Variant(f"{slow.compiler}, your fix", slow.compiler, slow.flags + tuple(fix_flags))


def not_layout_flags(fix_flags: list[str]) -> list[str]:
    """The flags of a fix that could change more than where code sits."""
    return [f for f in fix_flags if not (isinstance(f, str) and f.startswith(LAYOUT_FLAG_PREFIXES))]


def try_fix(fix_flags: list[str], runs: int = 10, iterations: int = 20_000_000, cpu: int | None = None,
            progress: bool = True) -> dict[str, Any]:
    """Build the slow build and your fix, show both loops' layouts, race them in one interleaved run."""
    bad = not_layout_flags(fix_flags)
    if bad:
        raise PerflabError(f"{bad[0]!r} is not a layout flag; use only {', '.join(LAYOUT_FLAG_PREFIXES)}")
    machine = probe()
    slow = exercise_slow_build()
    fixed = with_fix(slow, fix_flags)
    built = {v.name: build_variant(EXERCISE_SOURCE, v, EXERCISE_BUILD_DIR) for v in (slow, fixed)}
    times = measure_builds(built, iterations, runs, choose_cpu(machine, [cpu] if cpu is not None else None),
                           "slow build vs your fix", progress)
    speedup = stats.median(times[slow.name]) / stats.median(times[fixed.name])
    return {"layouts": {name: layout.render_lines(function_loop(binary, EXERCISE_FUNCTION)) for name, binary in built.items()},
            "ns_per_iter": times, "speedup": speedup}


def seed_table(result: dict[str, Any]) -> str:
    """One row per build: where its loop sits, what it crosses, its time, and its speed against gcc -O2."""
    base = stats.median(result["ns_per_iter"][SEED_BASELINE]) if SEED_BASELINE in result["ns_per_iter"] else None
    rows = [f"{'build':<48} {'loop at':>8} {'bytes':>5} {'64B line':>8} {'jump@32B':>8} {'ns/iter':>8}  95% CI          vs -O2"]
    for name, times in result["ns_per_iter"].items():
        shape = result["layouts"][name]
        low, high = stats.bootstrap_ci(times, stats.median) if len(times) >= 3 else (float("nan"), float("nan"))
        versus = f"{stats.median(times) / base:.2f}x" if base else ""
        rows.append(f"{name:<48} {'+' + str(shape['start_in_line']):>8} {shape['size']:>5} "
                    f"{'crosses' if shape['crosses 64-byte line'] else '-':>8} "
                    f"{'yes' if shape['jump crosses or ends on 32-byte boundary'] else '-':>8} "
                    f"{stats.median(times):>8.3f}  {low:.3f}-{high:.3f}    {versus}")
    return "\n".join(rows + [f"skipped: {s}" for s in result["skipped"]])


def build_panel():
    """Widgets: pick a compiler, an optimisation level and layout flags; build seed.c; see its loop; race gcc -O2."""
    import ipywidgets as widgets

    from ..notebook import action_button

    compilers = [c for c in ("gcc", "clang") if shutil.which(c)]
    compiler = widgets.Dropdown(options=compilers, value=compilers[0], description="compiler")
    level = widgets.Dropdown(options=["-O0", "-O1", "-O2", "-O3"], value="-O2", description="level")
    extras = {flag: widgets.Checkbox(value=False, description=label, style={"description_width": "initial"},
                                     layout=widgets.Layout(width="auto"))
              for flag, label in (("-DEXTRA_NOP", "one more nop in foo"), ("-falign-functions=16", "-falign-functions=16"),
                                  ("-falign-loops=64", "-falign-loops=64"),
                                  ("-Wa,-mbranches-within-32B-boundaries", "-Wa,-mbranches-within-32B-boundaries"))}
    def build_and_race():
        flags = (level.value, *(flag for flag, box in extras.items() if box.value))
        mine = Variant(f"{compiler.value} {' '.join(flags)}", compiler.value, flags)
        out_dir = BUILD_DIR / "06-loop-alignment" / "seed"
        built = {v.name: build_variant(REPO_ROOT / SOURCE_DIR / "seed.c", v, out_dir)
                 for v in (Variant(SEED_BASELINE, "gcc", ("-O2",)), mine)}
        print(layout.render_lines(function_loop(built[mine.name], "main")))
        times = measure_builds(built, QUICK.seed_iterations, QUICK.seed_runs * 2, choose_cpu(probe(), None),
                               "your build vs gcc -O2")
        for name, values in times.items():
            low, high = stats.bootstrap_ci(values, stats.median)
            print(f"{name:<60} {stats.median(values):.3f} ns/iter (95% CI {low:.3f}-{high:.3f})")

    button, output = action_button("Build and race gcc -O2", build_and_race)
    return widgets.VBox([widgets.HBox([compiler, level]), *extras.values(), button, output])


# --- pictures -----------------------------------------------------------------------------------------

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
    ax.errorbar(offsets, medians, yerr=[[m - lo for m, (lo, _) in zip(medians, cis)], [hi - m for m, (_, hi) in zip(medians, cis)]],
                fmt="none", ecolor="grey", elinewidth=0.8, zorder=1)
    ax.scatter(offsets, medians, c=colours, s=14, zorder=2)
    ax.set_xlabel("loop start offset (bytes past a 256-byte boundary); lines at 16 (dotted), 32 (dashed), 64 (solid)")
    ax.set_ylabel("ns per iteration (median, 95% CI)")
    ax.set_xlim(offsets[0] - 1, offsets[-1] + 1)
    ax.text(0.01, 0.97, f"{result['params']['loop']} loop: red = slow on 3 visits of 4; shaded = the loop crosses a 64-byte line",
            transform=ax.transAxes, va="top", fontsize=9, backgroundcolor="white")
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


def figures(verdict: Verdict) -> list[tuple[str, Any]]:
    """The sweep, the fresh slowest-vs-fastest race, and both loops' byte layouts."""
    from ..plots import distributions

    if verdict.results is None:
        return []
    result = results.load(verdict.results)
    check = result["confirmation"]
    fast, slow = check["fastest"], check["slowest"]
    return [
        ("Time per iteration at each start offset", sweep_figure(result)),
        ("Fresh interleaved run: slowest against fastest offset",
         distributions({f"offset {fast}": check["ns_per_iter"][str(fast)], f"offset {slow}": check["ns_per_iter"][str(slow)]},
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

