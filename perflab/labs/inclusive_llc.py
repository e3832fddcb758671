"""Lab 2: an inclusive last-level cache evicts another core's L1.

Predict from CPUID whether this machine's LLC is inclusive, then measure: a
victim chases pointers through a working set that fits in its L1 while an
aggressor on another core that shares the LLC streams over buffers from a
quarter of the LLC to twice its size. With an inclusive LLC the victim slows
down once the aggressor's buffer no longer fits: the LLC evicts the victim's
lines (it never sees the L1 hits that keep them hot) and takes them out of the
victim's L1 too. The verdict compares the victim with the largest aggressor
buffer against the victim with the smallest, so whatever else a busy
neighbour costs (a shared core, power, the memory controller) is in both.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from .. import cachesim, results, stats
from ..text import table
from ..build import ensure_built
from ..cpulist import check_cpus
from ..errors import PerflabError
from ..lock import measurement_lock
from ..probe import Machine, probe
from ..runner import run_once, stop_process_group
from ..verdict import Verdict, judge_change, unless_emulated

LAB = "inclusive-llc"
SOURCE_DIR = "labs/02-inclusive-llc"
# Aggressor buffer sizes, as fractions of the LLC: from well inside it to well beyond.
FRACTIONS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0)
ALONE = "alone"
# The smallest slowdown worth calling an effect: the seed's Haswell victim lost about 3%.
MIN_EFFECT = 0.02
AGGRESSOR_TIMEOUT_S = 120
PMU_EVENTS = ("L1-dcache-load-misses", "LLC-loads")


@dataclass(frozen=True)
class Settings:
    """How much to measure."""

    rounds: int  # interleaved rounds: each runs the victim once alone and once per aggressor size
    victim_ms: int  # how long each victim run lasts
    timeline_ms: int  # each phase of the timeline: alone, with the aggressor, alone again
    stress_seconds: int  # each stress-ng victim run
    stress_rounds: int


QUICK = Settings(rounds=8, victim_ms=150, timeline_ms=500, stress_seconds=1, stress_rounds=3)
FULL = Settings(rounds=20, victim_ms=300, timeline_ms=1000, stress_seconds=3, stress_rounds=6)


def settings_for(quick: bool, runs: int | None = None) -> Settings:
    chosen = QUICK if quick else FULL
    return replace(chosen, rounds=runs) if runs else chosen


def label(fraction: float) -> str:
    return f"{fraction:g}x LLC"


# --- the machine: which pair, which sizes, what to expect ---------------------------------------------

class CannotShow(PerflabError):
    """This machine has no pair of CPUs this lab can use."""


def llc_of(machine: Machine, cpu: int) -> dict:
    """The last-level cache `cpu` uses, from the probe."""
    caches = [c for c in machine.caches_of(cpu) if c["type"] in ("Data", "Unified")]
    if not caches:
        raise CannotShow(f"the kernel shows no caches for CPU {cpu} (/sys/devices/system/cpu/cpu{cpu}/cache is "
                         "missing, as in many VMs): the lab cannot size the aggressor")
    return max(caches, key=lambda c: c["level"])


def l1d_of(machine: Machine, cpu: int) -> dict | None:
    return next((c for c in machine.caches_of(cpu) if c["level"] == 1 and c["type"] == "Data"), None)


# ANCHOR: choose_pair
def choose_pair(machine: Machine, cpus: list[int] | None = None) -> tuple[int, int]:
    """A victim CPU and an aggressor CPU that share the LLC but not a core.

    SMT siblings share the L1 itself, which would evict the victim without
    any help from the LLC, so they are the last resort, never the first.
    CPU 0 takes the most interrupts, so it gets the aggressor if anything.
    """
    candidates = sorted(cpus) if cpus else machine.online_cpus
    if cpus:
        check_cpus(cpus, machine.online_cpus)
    siblings = {cpu: set(machine.cpu(cpu)["smt_siblings"]) for cpu in candidates}
    pairs = [(v, a) for group in machine.llc_groups() for v in group for a in group
             if v != a and v in siblings and a in siblings and a not in siblings[v]]
    if not pairs:
        groups = "; ".join(",".join(map(str, g)) for g in machine.llc_groups()) or "none shown"
        raise CannotShow(f"no two of CPUs {candidates} share an LLC without sharing a core (LLC groups: {groups}); "
                         "the lab needs two cores under one LLC")
    return max(pairs, key=lambda pair: (pair[0] != 0, pair[1] == 0, pair[0]))
# ANCHOR_END: choose_pair


def victim_working_set(machine: Machine, cpu: int) -> int:
    """Half the victim's L1d: it stays resident with room to spare (16 KiB if the size is unknown)."""
    l1d = l1d_of(machine, cpu)
    return l1d["size_kib"] * 1024 // 2 if l1d else 16 << 10


@dataclass(frozen=True)
class Pair:
    """Where the lab measures: the two CPUs, the LLC they share, and the victim's working set."""

    victim_cpu: int
    aggressor_cpu: int
    llc: dict
    working_set: int

    @property
    def llc_bytes(self) -> int:
        return self.llc["size_kib"] * 1024


def pair_for(machine: Machine, cpus: list[int] | None = None) -> Pair:
    """choose_pair, plus what the measurement needs to know about the pair's caches."""
    victim_cpu, aggressor_cpu = choose_pair(machine, cpus)
    return Pair(victim_cpu, aggressor_cpu, llc_of(machine, victim_cpu), victim_working_set(machine, victim_cpu))


# ANCHOR: predict
def predict(machine: Machine) -> dict[str, Any]:
    """What CPUID's inclusion bit says this lab should see, before measuring anything."""
    inclusive = machine.value("llc_inclusive")
    if inclusive is True:
        expected = "slowdown"
        text = ("CPUID says the LLC is inclusive: once the aggressor's buffer outgrows the LLC, the LLC must evict "
                "the victim's lines, and inclusion takes them out of the victim's L1 too. Expect the victim to "
                "slow down from about 1x LLC on")
    elif inclusive is False:
        expected = "no slowdown"
        text = ("CPUID says the LLC is not inclusive: it may evict the victim's lines without touching the "
                "victim's L1. Expect no slowdown at any aggressor size (a snoop filter could still "
                "back-invalidate; that would show as a surprise here)")
    else:
        expected = "unknown"
        text = "CPUID does not say whether the LLC is inclusive here (see `perflab probe`): measure and see"
    return {"llc_inclusive": inclusive, "expected": expected, "text": text}
# ANCHOR_END: predict


# --- the aggressor, driven over a pipe -----------------------------------------------------------------

class Aggressor:
    """The aggressor process in interactive mode; always stopped on exit, also on Ctrl-C and errors."""

    def __init__(self, binary: Path, cpu: int, max_bytes: int):
        self.argv = [str(binary), "-c", str(cpu), "-s", "0", "-m", str(max_bytes), "-i"]
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Aggressor:
        self.process = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, bufsize=1)
        self._read_until("meta")
        return self

    def __exit__(self, *exc) -> None:
        assert self.process is not None
        try:
            self.process.stdin.close()
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()

    def _read_until(self, kind: str) -> list[dict]:
        assert self.process is not None
        records = []
        deadline = time.monotonic() + AGGRESSOR_TIMEOUT_S
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                error = self.process.stderr.read().strip() or f"exit code {self.process.wait()}"
                raise PerflabError(f"the aggressor stopped: {error}")
            records.append(json.loads(line))
            if records[-1]["type"] == kind:
                return records
        raise PerflabError(f"the aggressor did not answer in {AGGRESSOR_TIMEOUT_S} s: is its CPU overloaded?")

    def stream(self, size: int) -> dict:
        """Stream over `size` bytes from now on (0: pause); return the period that just ended."""
        assert self.process is not None
        self.process.stdin.write(f"{size}\n")
        self.process.stdin.flush()
        return next(r for r in self._read_until("ready") if r["type"] == "period")


# --- measuring -----------------------------------------------------------------------------------------

def victim_argv(binary: Path, cpu: int, working_set: int, duration_ms: int) -> list[str]:
    return [str(binary), "-c", str(cpu), "-w", str(working_set), "-d", str(duration_ms)]


def pmu_events(machine: Machine) -> list[str]:
    """Hardware events to count on the victim, or [] where there is no PMU."""
    return list(PMU_EVENTS) if machine.value("hw_pmu") else []


def with_perf_stat(argv: list[str], events: list[str], output: Path) -> list[str]:
    """Wrap a command in `perf stat`, machine-readable, into a file (the command keeps stdout)."""
    return ["perf", "stat", "-x", ",", "-o", str(output), "-e", ",".join(events), "--", *argv]


def parse_perf_stat(text: str) -> dict[str, float | None]:
    """`perf stat -x ,` output -> {event: count}; None for "<not counted>" or "<not supported>"."""
    counts: dict[str, float | None] = {}
    for line in text.splitlines():
        fields = line.split(",")
        if line.startswith("#") or len(fields) < 3 or not fields[2]:
            continue
        try:
            counts[fields[2]] = float(fields[0])
        except ValueError:
            counts[fields[2]] = None
    return counts


def run_victim(argv: list[str], events: list[str]) -> tuple[list[float], dict[str, float | None]]:
    """One victim run: its ns per access, warm-up dropped, and the counted events (if any)."""
    counts: dict[str, float | None] = {}
    if events:
        with tempfile.TemporaryDirectory() as folder:
            output = Path(folder) / "perf.csv"
            _, samples = run_once(with_perf_stat(argv, events, output))
            counts = parse_perf_stat(output.read_text())
    else:
        _, samples = run_once(argv)
    return [s["ns_per_access"] for s in samples if not s.get("warmup")], counts


# ANCHOR: measure
def measure(pair: Pair, settings: Settings, events: tuple[str, ...] = (), progress: bool = True,
            fractions: tuple[float, ...] = FRACTIONS) -> dict[str, Any]:
    """Victim alone and beside every aggressor size, interleaved: each round visits all, in rotated order.

    One victim run gives one value: its median ns per access. The aggressor
    keeps one buffer of the largest size and is told which part to stream.
    """
    victim_run = victim_argv(ensure_built(SOURCE_DIR, "victim"), pair.victim_cpu, pair.working_set, settings.victim_ms)
    sizes = {ALONE: 0, **{label(f): int(f * pair.llc_bytes) // 64 * 64 for f in fractions}}
    labels = list(sizes)
    ns = {name: [] for name in labels}
    gbps = {name: [] for name in labels}
    counts = {name: [] for name in labels}
    with Aggressor(ensure_built(SOURCE_DIR, "aggressor"), pair.aggressor_cpu, max(sizes.values())) as streamer:
        bar = tqdm(total=settings.rounds * len(labels), desc="victim alone and beside each aggressor size",
                   disable=not progress, file=sys.stderr, leave=False)
        with bar:
            for r in range(settings.rounds):
                shift = r % len(labels)
                for name in labels[shift:] + labels[:shift]:
                    streamer.stream(sizes[name])
                    values, counted = run_victim(victim_run, list(events))
                    ns[name].append(stats.median(values))
                    counts[name].append(counted)
                    period = streamer.stream(0)  # pause: the next victim run decides its own company
                    if sizes[name]:
                        gbps[name].append(period["gb_per_s"])
                    bar.update()
    return {"sizes": sizes, "ns_per_access": ns, "aggressor_gb_per_s": {k: v for k, v in gbps.items() if v},
            "counters": counts if events else {}}
# ANCHOR_END: measure


def timeline(pair: Pair, size: int, phase_ms: int) -> dict[str, Any]:
    """One long victim run: alone, then with the aggressor streaming `size` bytes, then alone again."""
    victim, aggressor = ensure_built(SOURCE_DIR, "victim"), ensure_built(SOURCE_DIR, "aggressor")
    with Aggressor(aggressor, pair.aggressor_cpu, size) as streamer:
        start = time.monotonic()
        process = subprocess.Popen(victim_argv(victim, pair.victim_cpu, pair.working_set, 3 * phase_ms),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(phase_ms / 1000)
            on_ms = (time.monotonic() - start) * 1000  # it starts streaming as soon as it reads the order
            streamer.stream(size)
            time.sleep(phase_ms / 1000)
            streamer.stream(0)
            off_ms = (time.monotonic() - start) * 1000
            out, err = process.communicate(timeout=AGGRESSOR_TIMEOUT_S)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    if process.returncode != 0:
        raise PerflabError(f"victim failed: {err.strip()}")
    samples = [s for s in map(json.loads, out.splitlines()) if s["type"] == "sample" and not s.get("warmup")]
    return {"size": size, "aggressor_on_ms": on_ms, "aggressor_off_ms": off_ms,
            "t_ms": [s["t_ms"] for s in samples], "ns_per_access": [s["ns_per_access"] for s in samples]}


# --- the verdict ---------------------------------------------------------------------------------------

# ANCHOR: judge
def judge(ns_per_access: dict[str, list[float]]) -> tuple[str, str, Any]:
    """Does the victim slow down when the aggressor outgrows the LLC? Largest buffer vs smallest."""
    small, large = label(FRACTIONS[0]), label(FRACTIONS[-1])
    return judge_change(f"victim's time per access beside a {large} aggressor vs a {small} one",
                        ns_per_access[small], ns_per_access[large], MIN_EFFECT,
                        statistic=stats.median, unit="slowdown")
# ANCHOR_END: judge


def outcome(expected: str, verdict: str) -> str:
    """Prediction against measurement, in words."""
    seen = {"reproduced": "slowdown", "not-reproduced": "no slowdown"}.get(verdict)
    if seen is None or expected == "unknown":
        return "the measurement cannot settle the prediction" if seen is None else f"measured: {seen}"
    if seen == expected:
        return f"as predicted from CPUID: {seen}"
    if expected == "no slowdown":
        return ("NOT as predicted: the LLC is not inclusive, yet the victim slowed down. Suspects: a snoop filter "
                "that back-invalidates, or (in a VM) vCPUs that share more than the guest is told")
    return ("NOT as predicted: the LLC is inclusive, yet the victim kept its lines. Its refetches may be too rare "
            "to see at this size (a larger victim working set loses more), or the LLC protects lines that hit in an L1")


def slowdown_text(ns: dict[str, list[float]], name: str, reference: str) -> str:
    ratio = stats.median(ns[name]) / stats.median(ns[reference]) - 1
    low, high = stats.bootstrap_ratio_ci(ns[reference], ns[name], statistic=stats.median)
    return f"{ratio:+.1%} (95% CI {low - 1:+.1%} to {high - 1:+.1%})"


def run(cpus: list[int] | None = None, quick: bool = False, runs: int | None = None, progress: bool = True,
        wait: bool = True) -> Verdict:
    """The whole lab: predict, measure the sweep and a timeline, judge, compare with the prediction. Saved."""
    machine = probe()
    prediction = predict(machine)
    try:
        pair = pair_for(machine, cpus)
    except CannotShow as reason:
        if cpus:
            raise  # the CPUs the learner chose do not qualify: say so, do not judge the machine
        return Verdict(LAB, "cannot-show", f"{reason}. The simulator in the notebook shows the mechanism on any "
                       "machine; a multi-core machine (bare metal, or a KVM guest on one) can measure it", notes=[prediction["text"]])
    settings = settings_for(quick, runs)
    events = pmu_events(machine)
    with measurement_lock(f"perflab {LAB}", wait=wait):
        measured = measure(pair, settings, tuple(events), progress)
        picture = timeline(pair, int(FRACTIONS[-1] * pair.llc_bytes), settings.timeline_ms)
    verdict, reason, effect = judge(measured["ns_per_access"])
    result = results.new_result(LAB, "sweep", machine.summary(), {
        "victim_cpu": pair.victim_cpu, "aggressor_cpu": pair.aggressor_cpu, "llc_bytes": pair.llc_bytes,
        "working_set": pair.working_set, "fractions": list(FRACTIONS), "events": events, **asdict(settings)})
    result.update(prediction=prediction, timeline=picture, verdict=verdict, reason=reason, effect=asdict(effect),
                  **measured)
    path = results.save(result)
    ns = measured["ns_per_access"]
    notes = [
        prediction["text"],
        f"victim on CPU {pair.victim_cpu} ({pair.working_set // 1024} KiB, half its L1d), aggressor on CPU "
        f"{pair.aggressor_cpu}; they share the L{pair.llc['level']} of {pair.llc['size_kib'] // 1024} MiB "
        f"(CPUs {','.join(map(str, pair.llc['cpus']))})",
        f"victim alone: {stats.median(ns[ALONE]):.3f} ns per access; beside the {label(FRACTIONS[0])} aggressor "
        f"{slowdown_text(ns, label(FRACTIONS[0]), ALONE)}: what a busy neighbour costs without evicting anything",
    ]
    gbps = measured["aggressor_gb_per_s"].get(label(FRACTIONS[-1]))
    if gbps:
        notes.append(f"the {label(FRACTIONS[-1])} aggressor streamed {stats.median(gbps):.1f} GB/s: it replaces the "
                     f"whole LLC every {pair.llc_bytes / (stats.median(gbps) * 1e9) * 1e3:.0f} ms")
    for name in (label(FRACTIONS[0]), label(FRACTIONS[-1])):
        notes += [f"{name}: {w}" for w in stats.instability_warnings(ns[name], "victim runs")]
    if not events:
        notes.append("no hardware PMU here (a VM without a virtual PMU): timing only. Where one exists the lab "
                     f"counts {' and '.join(PMU_EVENTS)} on the victim, as the seed did")
    if machine.value("virtualization"):
        notes.append("in a VM the LLC's size and inclusion are what the hypervisor reports, and other guests "
                     "share the real LLC: a surprise here may be the host's doing")
    shown = f"{outcome(prediction['expected'], verdict)}; {reason}"
    return unless_emulated(Verdict(LAB, verdict, shown, effect, results=str(path), notes=notes), machine,
                           "an emulated CPU has no caches, so nothing can be evicted")


# --- stress-ng, as the seed ran it ---------------------------------------------------------------------

BOGO_RATE = re.compile(r"bogo-ops-per-second-real-time:\s*([0-9.eE+-]+)")


# ANCHOR: stress_ng
def stress_ng_argv(method: str, cpu: int, size: int, seconds: float, yaml_path: Path | None = None) -> list[str]:
    """The seed's commands: `--vm-method flip` for the victim, `read64` for the aggressor."""
    argv = ["stress-ng", "--vm", "1", "--vm-method", method, "--vm-bytes", str(size), "--vm-keep",
            "--taskset", str(cpu), "--timeout", f"{seconds}s", "--quiet"]
    return argv + (["--metrics-brief", "--yaml", str(yaml_path)] if yaml_path else [])
# ANCHOR_END: stress_ng


def parse_bogo_rate(yaml_text: str) -> float:
    """The stressor's bogo ops per second (real time) from stress-ng's --yaml output."""
    found = BOGO_RATE.search(yaml_text)
    if not found:
        raise PerflabError("stress-ng wrote no bogo-ops-per-second-real-time metric: is it older than 0.12?")
    return float(found.group(1))


def stress_ng_side_by_side(cpus: list[int] | None = None, quick: bool = True, runs: int | None = None,
                           progress: bool = True, wait: bool = True) -> dict[str, Any]:
    """The seed's measurement: stress-ng's victim alone and beside an LLC-sized read64 aggressor, interleaved."""
    if runs is not None and runs < 2:
        raise PerflabError(f"stress-ng side by side needs at least 2 runs of each, not {runs}: a spread needs two")
    if shutil.which("stress-ng") is None:
        raise PerflabError("stress-ng is not installed: run `make lab` (deps/debian.txt lists it)")
    machine = probe()
    pair = pair_for(machine, cpus)
    settings = settings_for(quick)
    settings = replace(settings, stress_rounds=runs) if runs else settings
    rates: dict[str, list[float]] = {ALONE: [], "with aggressor": []}
    with measurement_lock(f"perflab {LAB} stress-ng", wait=wait), tempfile.TemporaryDirectory() as folder:
        yaml_path = Path(folder) / "victim.yaml"
        order = [ALONE, "with aggressor"]
        for r in tqdm(range(settings.stress_rounds * 2), desc="stress-ng victim", disable=not progress,
                      file=sys.stderr, leave=False):
            company = order[r % 2]
            aggressor = None
            if company != ALONE:
                aggressor = subprocess.Popen(stress_ng_argv("read64", pair.aggressor_cpu, pair.llc_bytes, 10 * settings.stress_seconds + 60),
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
                time.sleep(1)  # let it map and touch its buffer first
            try:
                done = subprocess.run(stress_ng_argv("flip", pair.victim_cpu, 32 << 10, settings.stress_seconds, yaml_path),
                                      capture_output=True, text=True, timeout=settings.stress_seconds + 60)
            finally:
                if aggressor is not None:
                    stop_process_group(aggressor)
            if done.returncode != 0:
                raise PerflabError(f"stress-ng failed: {done.stderr.strip().splitlines()[-1:]}")
            rates[company].append(parse_bogo_rate(yaml_path.read_text()))
    per_op = seconds_per_op(rates)
    verdict, reason, effect = judge_change("stress-ng victim's time per bogo op, beside the aggressor vs alone",
                                           per_op[ALONE], per_op["with aggressor"], MIN_EFFECT, statistic=stats.median)
    result = results.new_result(LAB, "stress-ng", machine.summary(), {
        "victim_cpu": pair.victim_cpu, "aggressor_cpu": pair.aggressor_cpu, "llc_bytes": pair.llc_bytes,
        "commands": [stress_ng_argv("flip", pair.victim_cpu, 32 << 10, settings.stress_seconds),
                     stress_ng_argv("read64", pair.aggressor_cpu, pair.llc_bytes, settings.stress_seconds)],
        **asdict(settings)})
    result.update(bogo_ops_per_s=rates, verdict=verdict, reason=reason, effect=asdict(effect))
    result["path"] = str(results.save(result))
    return result


def seconds_per_op(rates: dict[str, list[float]]) -> dict[str, list[float]]:
    """Bogo ops per second -> seconds per op: higher is slower, like the lab's ns per access."""
    return {k: [1 / v for v in values] for k, values in rates.items()}


def side_by_side_table(lab_result: dict[str, Any], stress_result: dict[str, Any]) -> str:
    """The lab's victim and stress-ng's, alone and beside an LLC-sized aggressor."""
    ns = lab_result["ns_per_access"]
    rates = stress_result["bogo_ops_per_s"]
    per_op = seconds_per_op(rates)
    rows = [
        ("benchmark", "alone", "beside a 1x LLC aggressor", "time per access / op"),
        ("perflab victim (ns per access)", f"{stats.median(ns[ALONE]):.3f}", f"{stats.median(ns[label(1.0)]):.3f}",
         slowdown_text(ns, label(1.0), ALONE)),
        ("stress-ng vm flip (bogo ops/s)", f"{stats.median(rates[ALONE]):,.0f}",
         f"{stats.median(rates['with aggressor']):,.0f}", slowdown_text(per_op, "with aggressor", ALONE)),
    ]
    return table(rows)


# --- the exercises' described machine ------------------------------------------------------------------

# ANCHOR: described
DESCRIBED_NOISY_CPU = 3  # a batch job streams 40 MiB here
DESCRIBED_IRQ_CPU = 8  # the network card's interrupts land here
# Leaf 4 subleaf 3 of a Xeon E5-2667 v3 (Haswell-EP): its L3.
DESCRIBED_LLC_REGISTERS = {"eax": 0x3C07C163, "ebx": 0x04C0003F, "ecx": 0x00003FFF, "edx": 0x00000006}
# ANCHOR_END: described


def described_machine() -> Machine:
    """Two Xeon E5-2667 v3 sockets: 8 cores each, SMT 2, a 20 MiB inclusive L3 per socket.

    CPUs 0-7 are socket 0's cores and 8-15 socket 1's; 16-31 are their SMT
    siblings, in the same order, as Linux numbers them on such machines.
    """
    from ..probe import Fact

    topology, caches = {}, []
    for cpu in range(32):
        core = cpu % 16
        topology[str(cpu)] = {"package": core // 8, "die": 0, "core": core % 8, "smt_siblings": [core, core + 16],
                              "node": core // 8}
    for core in range(16):
        caches += [{"level": 1, "type": "Data", "size_kib": 32, "cpus": [core, core + 16], "ways": 8, "line_size": 64},
                   {"level": 2, "type": "Unified", "size_kib": 256, "cpus": [core, core + 16], "ways": 8, "line_size": 64}]
    for socket in range(2):
        cpus = [c for c in range(32) if topology[str(c)]["package"] == socket]
        caches.append({"level": 3, "type": "Unified", "size_kib": 20480, "cpus": cpus, "ways": 20, "line_size": 64})
    source = "described in the exercise"
    return Machine({"online_cpus": Fact(list(range(32)), source), "topology": Fact(topology, source),
                    "caches": Fact(caches, source), "llc_inclusive": Fact(True, source)})


# --- figures -------------------------------------------------------------------------------------------

def sweep_figure(result: dict[str, Any]):
    """The victim's time per access against the aggressor's buffer size, with the prediction drawn in."""
    import matplotlib.pyplot as plt

    ns = result["ns_per_access"]
    fractions = result["params"]["fractions"]
    medians = [stats.median(ns[label(f)]) for f in fractions]
    cis = [stats.bootstrap_ci(ns[label(f)], stats.median) for f in fractions]
    figure, ax = plt.subplots(figsize=(9, 4))
    alone_low, alone_high = stats.bootstrap_ci(ns[ALONE], stats.median)
    ax.axhspan(alone_low, alone_high, color="#c7e9c0", label="victim alone (95% CI)")
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1)
    ax.errorbar(fractions, medians, yerr=[[m - lo for m, (lo, _) in zip(medians, cis)],
                                          [hi - m for m, (_, hi) in zip(medians, cis)]],
                fmt="o-", color="#1f77b4", capsize=3, label="beside the aggressor (median, 95% CI)")
    ax.set_xlabel(f"aggressor's buffer, in LLCs ({result['params']['llc_bytes'] >> 20} MiB = 1)")
    ax.set_ylabel("victim: ns per access")
    ax.text(0.01, 0.97, f"prediction: {result['prediction']['expected']} above 1x LLC", transform=ax.transAxes,
            va="top", fontsize=9, backgroundcolor="white")
    ax.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    return figure


def timeline_figure(picture: dict[str, Any]):
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots(figsize=(9, 3))
    ax.axvspan(picture["aggressor_on_ms"], picture["aggressor_off_ms"], color="#fdd0a2",
               label=f"aggressor streaming {picture['size'] >> 20} MiB")
    ax.plot(picture["t_ms"], picture["ns_per_access"], ".", markersize=3, color="#1f77b4")
    ax.set_xlabel("time since the victim started (ms)")
    ax.set_ylabel("victim: ns per access")
    ax.legend(loc="upper right", fontsize=8)
    figure.tight_layout()
    return figure


def simulator_figure(geometry: cachesim.Geometry = cachesim.SCALED, fractions=None, passes: int = 3):
    """The simulator's victim: L1 misses per 1000 accesses against the aggressor's size, for each policy."""
    import matplotlib.pyplot as plt

    fractions = fractions or [0.25, 0.5, 0.75, 0.875, 0.9375, 1.0, 1.25, 1.5, 2.0]
    figure, ax = plt.subplots(figsize=(9, 3.5))
    for policy, marker in zip(cachesim.POLICIES, "os^"):
        counts = cachesim.sweep(policy, fractions, geometry, passes)
        ax.plot(fractions, [1000 * c.l1_misses / c.accesses for c in counts.values()], marker=marker, label=policy)
    ax.axvline(cachesim.eviction_threshold(geometry), color="grey", linestyle=":", label="inclusive LLC full")
    ax.set_xlabel("aggressor's buffer, in LLCs")
    ax.set_ylabel("victim L1 misses per 1000 accesses")
    ax.legend(fontsize=8)
    figure.tight_layout()
    return figure


def figures(verdict: Verdict) -> list[tuple[str, Any]]:
    if verdict.results is None:
        return [("Simulator: what an inclusive LLC would do", simulator_figure())]
    result = results.load(verdict.results)
    return [("Victim's time per access against the aggressor's buffer size", sweep_figure(result)),
            ("One victim run: alone, beside the largest aggressor, alone again", timeline_figure(result["timeline"]))]


def simulator_panel():
    """Widgets: change the caches' sizes, ways and policy; replay the textbook trace and the sweep."""
    import ipywidgets as widgets

    from ..notebook import show_figure

    style = {"description_width": "initial"}
    trace = widgets.Text(value=cachesim.TEXTBOOK_TRACE, description="trace", style=style)
    l1_lines = widgets.IntSlider(value=2, min=1, max=6, description="L1 lines", style=style)
    llc_lines = widgets.IntSlider(value=4, min=2, max=8, description="LLC lines", style=style)
    policy = widgets.Dropdown(options=cachesim.POLICIES, description="LLC policy", style=style)
    textbook = widgets.interactive_output(
        lambda trace, l1, llc, policy: _print_replay(trace, policy, l1, llc),
        {"trace": trace, "l1": l1_lines, "llc": llc_lines, "policy": policy})
    llc_sets = widgets.IntSlider(value=64, min=8, max=256, step=8, description="LLC sets", style=style)
    llc_ways = widgets.IntSlider(value=16, min=2, max=32, description="LLC ways", style=style)
    victim = widgets.IntSlider(value=32, min=1, max=64, description="victim lines", style=style)
    sweep_output = widgets.interactive_output(
        lambda sets, ways, lines: show_figure(simulator_figure(cachesim.Geometry((8, 8), (sets, ways), lines))),
        {"sets": llc_sets, "ways": llc_ways, "lines": victim})
    return widgets.VBox([widgets.HTML("<b>The textbook trace, one access at a time</b>"),
                         widgets.HBox([trace, policy]), widgets.HBox([l1_lines, llc_lines]), textbook,
                         widgets.HTML("<b>Victim and aggressor, scaled down (L1: 8 sets x 8 ways)</b>"),
                         widgets.HBox([llc_sets, llc_ways, victim]), sweep_output])


def _print_replay(trace: str, policy: str, l1_lines: int, llc_lines: int) -> None:
    try:
        print(cachesim.render_steps(cachesim.replay(trace, policy, l1_lines, llc_lines)))
    except ValueError as err:
        print(err)
