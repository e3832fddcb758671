"""Lab 7: the hottest function is not the one to fix: causal profiling with coz.

Profile the commit program two ways: perf ranks functions by CPU time, coz
estimates how much each line would speed up the whole program. Then close
the loop: really halve the work of coz's top line and of perf's top
function, race both against the unchanged program in one interleaved run,
and put coz's predictions beside the measured speedups.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable

from tqdm.auto import tqdm

from .. import coz, results, stats, text
from ..build import ensure_built
from ..cpulist import check_cpus
from ..errors import PerflabError
from ..lock import measurement_lock
from ..paths import BUILD_DIR, LABS_DIR, REPO_ROOT, results_dir
from ..probe import Machine, probe
from ..runner import Config, interleave, stop_process_group
from ..verdict import Verdict, judge_change

LAB = "causal-profiling"
SOURCE_DIR = "labs/07-causal-profiling"
SOURCE = REPO_ROOT / SOURCE_DIR / "commit.c"
POINT = "batch"  # the program's progress point
FUNCTIONS = ("parse_records", "build_index", "checksum_batch", "compress_log")
OPTIMISED = 0.5  # the real optimisation halves a function's work: coz's 50% virtual speedup
NEAR = 0.1  # coz's experiments within this of 50% make its prediction...
MIN_NEAR = 3  # ...when there are at least this many
MIN_EXPERIMENTS = 4  # a line with fewer experiments than this is too noisy to rank
MIN_EFFECT = 0.05  # a change of the batch rate smaller than 5% is not worth an optimisation
SAMPLE_PROFILES = Path("/usr/share/coz-profiler/viewer/profiles")  # shipped by Debian's coz-profiler
PERF_FREQUENCY = 997  # samples per second; prime, so it does not beat with periodic work


class CannotShow(PerflabError):
    """This machine cannot run the two threads side by side."""


@dataclass(frozen=True)
class Settings:
    """How long to profile and how much to race."""

    perf_seconds: float  # one perf record run
    survey_seconds: float  # one coz run over every line; coz runs about two experiments a second
    survey_runs: int  # survey runs, pooled
    focus_seconds: float  # one coz run on each pick's line alone (--fixed-line), for the predictions
    race_seconds: float  # one timed run of each build in the race
    race_rounds: int  # interleaved rounds of the race


QUICK = Settings(perf_seconds=1, survey_seconds=10, survey_runs=1, focus_seconds=6, race_seconds=0.3, race_rounds=6)
FULL = Settings(perf_seconds=3, survey_seconds=30, survey_runs=2, focus_seconds=25, race_seconds=0.5, race_rounds=15)


def settings_for(quick: bool, runs: int | None = None) -> Settings:
    """QUICK or FULL; `runs` sets the race's rounds."""
    chosen = QUICK if quick else FULL
    return replace(chosen, race_rounds=runs) if runs else chosen


def coz_seconds(settings: Settings) -> float:
    return settings.survey_runs * settings.survey_seconds + 2 * settings.focus_seconds


def duration_text(settings: Settings) -> str:
    seconds = settings.perf_seconds + coz_seconds(settings) + 3 * settings.race_rounds * (settings.race_seconds + 0.05)
    return f"about {seconds / 60:.0f} min" if seconds >= 90 else f"about {seconds:.0f} s"


def require_tools() -> None:
    for tool, package in (("coz", "coz-profiler"), ("perf", "linux-perf")):
        if shutil.which(tool) is None:
            raise PerflabError(f"{tool} is missing: run `make lab` (it installs Debian's {package})")


def choose_cpus(machine: Machine, cpus: list[int] | None = None) -> tuple[int, int]:
    """(commit thread's CPU, log thread's CPU): two CPUs that are not SMT siblings, CPU 0 last."""
    chosen = cpus or machine.online_cpus
    check_cpus(chosen, machine.online_cpus)
    order = sorted(chosen, key=lambda c: (c == 0, -c))  # CPU 0 takes the most interrupts
    for commit_cpu in order:
        siblings = set(machine.cpu(commit_cpu)["smt_siblings"]) | {commit_cpu}
        for log_cpu in order:
            if log_cpu not in siblings:
                return commit_cpu, log_cpu
    raise CannotShow(f"the lab needs two CPUs on different cores, and {'the CPUs given are' if cpus else 'this machine has'} "
                     f"only {len(chosen)} CPU(s) on one core: both threads would take turns, so the slower thread "
                     "would no longer set the pace")


def program_argv(binary: Path, cpus: tuple[int, int], seconds: float, factors: dict[str, float] | None = None) -> list[str]:
    argv = [str(binary), "-d", str(seconds), "-c", f"{cpus[0]},{cpus[1]}"]
    for function, factor in (factors or {}).items():
        argv += ["-x", f"{function}={factor}"]
    return argv


# ---------------------------------------------------------------- reading the source


# ANCHOR: lines
DEFINITION = re.compile(r"^(?!#)\S.*?\b(\w+)\([^;]*\)\s*$")  # a function definition's first line (not a macro)


def function_of_line(source: str, line: int) -> str | None:
    """The function whose body holds `line` (1-based), from the definitions above it."""
    for code in reversed(source.splitlines()[:line]):
        found = DEFINITION.match(code)
        if found:
            return found.group(1)
    return None


def function_at(source: str, location: str) -> str | None:
    """The commit.c function a coz location (FILE:LINE) falls in; None for other files."""
    file, _, line = coz.short_location(location).rpartition(":")
    return function_of_line(source, int(line)) if file == SOURCE.name else None


def work_lines(source: str) -> dict[str, int]:
    """Each function's WORK(...) line: the one line coz can point to."""
    lines: dict[str, int] = {}
    for number, code in enumerate(source.splitlines(), 1):
        if code.lstrip().startswith("WORK("):
            lines[function_of_line(source, number)] = number
    return lines
# ANCHOR_END: lines


# ---------------------------------------------------------------- the two profilers


def parse_perf_report(text: str) -> list[dict[str, Any]]:
    """`perf report -F overhead,sym --field-separator=,` lines -> [{symbol, share, kernel}], largest first."""
    ranking = []
    for line in text.splitlines():
        share, sep, symbol = line.partition(",")
        if not sep or not share.strip().endswith("%"):
            continue
        kind, _, name = symbol.strip().partition(" ")
        ranking.append({"symbol": name.strip(), "share": float(share.strip().rstrip("%")) / 100,
                        "kernel": kind == "[k]"})
    return sorted(ranking, key=lambda r: -r["share"])


def perf_ranking(argv: list[str], folder: Path) -> list[dict[str, Any]]:
    """Sample on the software task-clock (no hardware PMU needed) and rank symbols by samples."""
    data = folder / "perf.data"
    recorded = subprocess.run(["perf", "record", "-q", "-e", "task-clock", "-F", str(PERF_FREQUENCY),
                               "-o", str(data), "--", *argv], capture_output=True, text=True)
    if recorded.returncode != 0:
        last = (recorded.stderr.strip().splitlines() or ["no message"])[-1]
        raise PerflabError(f"perf record failed: {last}; as root, or after `sysctl kernel.perf_event_paranoid=1`, it can sample")
    report = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "-q", "--no-children",
                             "-F", "overhead,sym", "--field-separator=,"], capture_output=True, text=True)
    return parse_perf_report(report.stdout)


def hottest_function(ranking: list[dict[str, Any]]) -> str | None:
    """perf's first choice among the functions the lab can optimise (None: perf saw none of them)."""
    return next((r["symbol"] for r in ranking if r["symbol"] in FUNCTIONS), None)


# ANCHOR: coz_run
def coz_run(argv: list[str], output: Path, seconds: float, bar: tqdm, fixed_line: str | None = None) -> str:
    """One `coz run` of the program, over every line or one; returns the profile's text.

    The bar moves with the clock: coz says nothing until the end.
    """
    output.unlink(missing_ok=True)
    focus = ["--fixed-line", fixed_line] if fixed_line else []
    process = subprocess.Popen(["coz", "run", *focus, "-o", str(output), "---", *argv], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        start = time.monotonic()
        while process.poll() is None:
            time.sleep(0.25)
            if time.monotonic() - start > 3 * seconds + 30:
                raise PerflabError(f"coz ran for over {3 * seconds + 30:.0f} s on a {seconds:.0f} s program and was "
                                   "stopped: is a CPU overloaded?")
            bar.n = min(bar.total, bar.n + 0.25)
            bar.refresh()
        if process.returncode != 0:
            last = (process.stderr.read().strip().splitlines() or [f"exit code {process.returncode}"])[-1]
            raise PerflabError(f"coz run failed: {last}; check that the program was built with -gdwarf-3 "
                               f"(`make -C {SOURCE_DIR}`)")
    finally:
        stop_process_group(process)
    return output.read_text()
# ANCHOR_END: coz_run


class CozSession:
    """Every coz run of one lab run, under one progress bar; the profiles' texts, one after another."""

    def __init__(self, argv_for: Callable[[float], list[str]], folder: Path, total_seconds: float, progress: bool):
        self.argv_for, self.folder, self.text = argv_for, folder, ""
        self.bar = tqdm(total=total_seconds, desc="coz", disable=not progress, file=sys.stderr, leave=False,
                        bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s of coz")

    def run(self, seconds: float, fixed_line: str | None = None) -> coz.Profile:
        """One more run; returns the pooled profile of all runs so far."""
        start = self.bar.n
        output = self.folder / f"coz-{self.text.count('startup')}.coz"
        self.text += coz_run(self.argv_for(seconds), output, seconds, self.bar, fixed_line)
        self.bar.n = start + seconds
        self.bar.refresh()
        return coz.parse(self.text)

    def close(self) -> None:
        self.bar.close()


# ---------------------------------------------------------------- closing the loop


def race(binary: Path, cpus: tuple[int, int], picks: dict[str, str], settings: Settings,
         progress: bool) -> dict[str, list[float]]:
    """Batches per second of the unchanged program and of each pick's function at half its work, interleaved."""
    configs = [Config("unchanged", program_argv(binary, cpus, settings.race_seconds))]
    configs += [Config(function, program_argv(binary, cpus, settings.race_seconds, {function: OPTIMISED}))
                for function in dict.fromkeys(picks.values())]
    runs = interleave(configs, settings.race_rounds, desc="racing the builds", progress=progress)
    return {label: run.values("batches_per_s") for label, run in runs.items()}


def time_saved(rate_ratio: float) -> float:
    """A batch-rate ratio (new / old) as the share of each batch's time saved: coz's unit."""
    return 1 - 1 / rate_ratio


# ANCHOR: compare
def compare(profile: coz.Profile, lines: dict[str, int], picks: dict[str, str],
            rates: dict[str, list[float]]) -> list[dict[str, Any]]:
    """For each pick: coz's predicted time saved at 50% against the measured, each with its 95% CI."""
    baseline = coz.baseline_experiments(profile)
    rows = []
    for who, function in picks.items():
        location = next((e.selected for e in profile.experiments
                         if coz.short_location(e.selected) == f"{SOURCE.name}:{lines[function]}"), None)
        estimate = coz.predicted_speedup(baseline, coz.near(profile, location, OPTIMISED, NEAR), POINT) \
            if location else None
        _, _, effect = judge_change(function, rates["unchanged"], rates[function], MIN_EFFECT, statistic=stats.median)
        actual = {"value": time_saved(1 + effect.value), "low": time_saved(1 + effect.ci_low),
                  "high": time_saved(1 + effect.ci_high), "p_value": effect.p_value}
        predicted = asdict(estimate) if estimate and estimate.experiments >= MIN_NEAR else None
        rows.append({"pick": who, "function": function, "line": lines[function], "predicted": predicted,
                     "actual": actual, "held": predicted and held(predicted, actual)})
    return rows


def held(predicted: dict[str, float], actual: dict[str, float]) -> bool:
    """Within 5 points of the measurement, or the two 95% intervals overlap."""
    return abs(predicted["value"] - actual["value"]) <= MIN_EFFECT or \
        (predicted["low"] <= actual["high"] and actual["low"] <= predicted["high"])
# ANCHOR_END: compare


def table_text(rows: list[dict[str, Any]]) -> str:
    """Predicted against actual, as the notebook and the CLI print it."""
    def interval(v: dict[str, float] | None) -> str:
        return "no experiments near 50%" if v is None else f"{v['value']:+.1%} ({v['low']:+.1%} to {v['high']:+.1%})"

    header = [("pointed to by", "function (line)", "coz predicted", "measured", "held?")]
    return text.table(header + [(r["pick"], f"{r['function']} (commit.c:{r['line']})", interval(r["predicted"]),
                                  interval(r["actual"]), {True: "yes", False: "no", None: "-"}[r["held"]])
                                 for r in rows])


# ANCHOR: judge
def judge(picks: dict[str, str], rates: dict[str, list[float]]) -> tuple[str, str, Any]:
    """Reproduced when coz's pick really speeds the program up and perf's pick really does not."""
    if picks["perf"] == picks["coz"]:
        _, shown, effect = judge_change(picks["coz"], rates["unchanged"], rates[picks["coz"]], MIN_EFFECT, stats.median)
        return "not-reproduced", f"perf and coz both point to {picks['coz']}: here the hottest function is the one " \
            f"to fix ({shown})", effect
    coz_verdict, coz_shown, effect = judge_change(f"halving {picks['coz']} (coz's pick)", rates["unchanged"],
                                                  rates[picks["coz"]], MIN_EFFECT, stats.median)
    perf_verdict, perf_shown, _ = judge_change(f"halving {picks['perf']} (perf's pick)", rates["unchanged"],
                                               rates[picks["perf"]], MIN_EFFECT, stats.median)
    shown = f"batch rate: {coz_shown}; {perf_shown}"
    if coz_verdict == "reproduced" and perf_verdict == "not-reproduced":
        return "reproduced", f"the hottest function was not the one to fix; {shown}", effect
    if coz_verdict == "not-reproduced" or perf_verdict == "reproduced":
        return "not-reproduced", f"coz's pick did not beat perf's here; {shown}", effect
    return "inconclusive", shown, effect
# ANCHOR_END: judge


def run(cpus: list[int] | None = None, quick: bool = False, runs: int | None = None, progress: bool = True,
        wait: bool = True) -> Verdict:
    """The whole lab: perf's ranking, coz's profile, the race, predicted against actual. Saved."""
    require_tools()
    machine = probe()
    try:
        chosen = choose_cpus(machine, cpus)
    except CannotShow as reason:
        if cpus:
            raise
        return Verdict(LAB, "cannot-show", f"{reason}. The book's chapter and the sample profiles in the notebook "
                       "show the idea; any machine with two cores (or `perflab vm`) can measure it")
    settings = settings_for(quick, runs)
    binary = ensure_built(SOURCE_DIR, "commit")
    source = SOURCE.read_text()
    lines = work_lines(source)
    with measurement_lock(f"perflab {LAB}", wait=wait), tempfile.TemporaryDirectory() as folder:
        ranking = perf_ranking(program_argv(binary, chosen, settings.perf_seconds), Path(folder))
        session = CozSession(lambda seconds: program_argv(binary, chosen, seconds), Path(folder),
                             coz_seconds(settings), progress)
        try:
            for _ in range(settings.survey_runs):
                profile = session.run(settings.survey_seconds)
            ranked = coz.rank_lines(profile, POINT, MIN_EXPERIMENTS)
            picks = {"coz": function_at(source, ranked[0][0]) if ranked else None,
                     "perf": hottest_function(ranking)}
            if picks["coz"] in FUNCTIONS and picks["perf"] in FUNCTIONS:
                for function in dict.fromkeys(picks.values()):
                    profile = session.run(settings.focus_seconds, f"{SOURCE}:{lines[function]}")
        finally:
            session.close()
        profile_text = session.text
        ready = picks["coz"] in FUNCTIONS and picks["perf"] in FUNCTIONS
        rates = race(binary, chosen, picks, settings, progress) if ready else {}
    rows = compare(profile, lines, picks, rates) if rates else []
    if rates:
        verdict, reason, effect = judge(picks, rates)
    elif picks["perf"] is None:
        verdict, reason, effect = "inconclusive", "perf's samples name none of the program's functions: is " \
            "build/07-causal-profiling/commit stripped? Rebuild with `make -C labs/07-causal-profiling`", None
    elif not ranked:
        verdict, reason, effect = "inconclusive", f"coz ran {len(profile.experiments)} experiment(s), too few to " \
            f"rank any line ({MIN_EXPERIMENTS} per line needed): rerun without --quick, whose coz runs last longer", None
    else:
        verdict, reason, effect = "inconclusive", f"coz ranked {coz.short_location(ranked[0][0])} first, which is " \
            "not a line the lab can optimise: the profile is too noisy; rerun without --quick", None
    result = results.new_result(LAB, "profile", machine.summary(), {
        "cpus": list(chosen), "point": POINT, "optimised": OPTIMISED, **asdict(settings)})
    result.update(perf=ranking, coz_profile=profile_text, coz_ranking=ranked, picks=picks, rates=rates,
                  comparison=rows, verdict=verdict, reason=reason, effect=effect and asdict(effect))
    path = results.save(result)
    notes = [f"commit thread on CPU {chosen[0]}, log thread on CPU {chosen[1]}; "
             f"coz ran {settings.survey_runs} x {settings.survey_seconds:.0f} s over every line, then "
             f"{settings.focus_seconds:.0f} s on each pick's line: {len(profile.experiments)} experiments",
             "perf's ranking: " + ", ".join(f"{r['symbol']} {r['share']:.0%}" for r in ranking[:4]),
             "coz's ranking (mean predicted speedup over the tried speedups): " + ", ".join(
                 f"{function_at(source, line) or coz.short_location(line)} {value:+.1%}" for line, value in ranked[:4])]
    for row in rows:
        if row["held"] is not None:
            notes.append(f"coz's prediction for halving {row['function']}: {row['predicted']['value']:+.1%} of each "
                         f"batch's time saved; measured {row['actual']['value']:+.1%}: "
                         f"{'held' if row['held'] else 'did not hold'} (held: within {MIN_EFFECT:.0%} points, or "
                         "the 95% intervals overlap)")
    if rates:
        notes += [f"unchanged: {w}" for w in stats.instability_warnings(rates["unchanged"], "timed runs")]
    notes += profile.warnings
    if machine.value("virtualization"):
        notes.append("in a VM, coz's pauses and perf's samples run on the software clock, and a neighbour on the host "
                     "can stretch any experiment: repeat the lab before trusting one curve")
    return Verdict(LAB, verdict, reason, effect, results=str(path), notes=notes)


# ---------------------------------------------------------------- the sample profiles Debian ships


def sample_profiles() -> list[str]:
    """Names of the profiles coz-profiler ships (from the coz paper's benchmarks), if it is installed."""
    return sorted(p.stem for p in SAMPLE_PROFILES.glob("*.coz"))


def read_sample(name: str) -> coz.Profile:
    if name not in sample_profiles():
        raise PerflabError(f"no sample profile {name!r}; the samples are: {', '.join(sample_profiles()) or 'none'} "
                           "(Debian's coz-profiler installs them; run `make lab`)")
    return coz.read(SAMPLE_PROFILES / f"{name}.coz")


def describe(profile: coz.Profile, top: int = 5) -> str:
    """What is in a profile: runs, experiments, the progress point, where the samples fell, what coz ranks first."""
    point = profile.points()[0]
    total = sum(profile.samples.values()) or 1
    by_samples = sorted(profile.samples.items(), key=lambda kv: -kv[1])[:top]
    ranked = coz.rank_lines(profile, point, min_experiments=20)[:top]
    rows = [("most samples (what perf would show)", "share", "largest causal impact (coz)", "mean predicted")]
    for i in range(max(len(by_samples), len(ranked))):
        left = by_samples[i] if i < len(by_samples) else ("", 0)
        right = ranked[i] if i < len(ranked) else ("", None)
        rows.append((coz.short_location(left[0]), f"{left[1] / total:.0%}" if left[0] else "",
                     coz.short_location(right[0]), f"{right[1]:+.1%}" if right[1] is not None else ""))
    return (f"{profile.runs} run(s), {len(profile.experiments)} experiments, progress point {point}\n"
            + text.table(rows) + "".join(f"\nwarning: {w}" for w in profile.warnings))


# ---------------------------------------------------------------- figures


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
            ax.errorbar([v["value"]], [i + offset], xerr=[[v["value"] - v["low"]], [v["high"] - v["value"]]],
                        fmt="o", color=colour, capsize=4, label={"predicted": "coz predicted", "actual": "measured"}[key]
                        if i == 0 else None)
    ax.set_yticks(range(len(rows)), [f"halve {r['function']}\n({r['pick']}'s pick)" for r in rows])
    ax.axvline(0, color="grey", lw=0.8)
    ax.xaxis.set_major_formatter(PercentFormatter(1))
    ax.set_xlabel("time saved per batch")
    ax.legend(fontsize=8)
    return figure


def figures(verdict: Verdict) -> list[tuple[str, Any]]:
    if verdict.results is None:
        return []
    result = results.load(verdict.results)
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


# ---------------------------------------------------------------- the exercise program

EXERCISE_SOURCE = REPO_ROOT / SOURCE_DIR / "ingest.c"
EXERCISE_BUILD_DIR = BUILD_DIR / "07-causal-profiling" / "exercise"
EXERCISE_CFLAGS = ["-O2", "-gdwarf-3", "-Wall", "-std=gnu11", "-pthread"]  # as the lab's Makefile builds


def build_exercise(source_text: str, name: str) -> Path:
    """Compile a version of ingest.c (the learner's, or a known one) as the lab's Makefile would."""
    if shutil.which("cc") is None:
        raise PerflabError("no C compiler: run `make lab` (it installs build-essential)")
    EXERCISE_BUILD_DIR.mkdir(parents=True, exist_ok=True)
    source = EXERCISE_BUILD_DIR / f"{name}.c"
    source.write_text(source_text)
    binary = EXERCISE_BUILD_DIR / name
    done = subprocess.run(["cc", *EXERCISE_CFLAGS, f"-I{LABS_DIR}", "-o", str(binary), str(source), "-pthread"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if "error" in line] or done.stderr.splitlines()[-1:]
        raise PerflabError(f"{name}.c does not compile: {errors[0] if errors else 'no message'}")
    return binary


def exercise_argv(binary: Path, cpus: tuple[int, int], blocks: int) -> list[str]:
    return [str(binary), "-n", str(blocks), "-c", f"{cpus[0]},{cpus[1]}"]


def line_numbers(source: str, function: str, pattern: str) -> list[int]:
    """Lines inside `function`'s body that contain `pattern`."""
    return [n for n, code in enumerate(source.splitlines(), 1)
            if pattern in code and function_of_line(source, n) == function and not DEFINITION.match(code)]


def exercise_copy() -> Path:
    """The learner's own copy of ingest.c to edit, under results/ (made from the original the first time)."""
    path = results_dir() / LAB / "my-ingest.c"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(EXERCISE_SOURCE.read_text())
    return path


def profile_exercise(seconds: float = 20, progress: bool = True) -> tuple[list[dict[str, Any]], coz.Profile]:
    """perf's ranking and a coz profile of the original ingest.c, as the lab profiles commit.c."""
    require_tools()
    binary = build_exercise(EXERCISE_SOURCE.read_text(), "baseline")
    cpus = choose_cpus(probe())
    blocks = max(1, int(seconds * 40))  # about 40 blocks a second, slower under coz
    with measurement_lock(f"perflab {LAB} exercise"), tempfile.TemporaryDirectory() as folder:
        ranking = perf_ranking(exercise_argv(binary, cpus, max(1, blocks // 10)), Path(folder))
        session = CozSession(lambda _: exercise_argv(binary, cpus, blocks), Path(folder), seconds, progress)
        try:
            profile = session.run(seconds)
        finally:
            session.close()
    return ranking, profile


def race_exercise(sources: dict[str, str], rounds: int, blocks: int, progress: bool = True) -> dict[str, list[float]]:
    """Blocks per second of each version of ingest.c, built and raced in one interleaved run."""
    cpus = choose_cpus(probe())
    configs = [Config(name, exercise_argv(build_exercise(source, name.replace(" ", "-")), cpus, blocks))
               for name, source in sources.items()]
    with measurement_lock(f"perflab {LAB} exercise"):
        runs = interleave(configs, rounds, desc="racing the versions", progress=progress)
    return {name: run.values("blocks_per_s") for name, run in runs.items()}
