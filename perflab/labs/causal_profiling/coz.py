"""Read coz's profile.coz and turn its experiments into causal speedup estimates.

A profile is a text file of records, one per line: a type, then tab-separated
key=value fields (a line starting with "{" is one JSON record instead).

    startup           time=NS                 a run began (coz appends runs to one file)
    experiment        selected=FILE:LINE speedup=S duration=NS selected-samples=N
    throughput-point  name=P delta=N          visits of progress point P during that experiment
    progress-point    name=P type=source delta=N   the same, in coz's older format
    latency-point     name=P arrivals=N departures=N difference=N   a COZ_BEGIN/COZ_END pair
    samples           location=FILE:LINE count=N   where the samples fell (every ~100 ms)
    runtime           time=NS                 time since startup
    shutdown          time=NS samples=N       the run ended

An experiment makes one line virtually S times faster (S in 0, 0.05, ... 1)
by pausing every other thread whenever that line runs; `duration` has those
pauses taken out. So the progress point's period, duration / delta, is how
often the program would make progress if the line really were that much
faster. The predicted program speedup is 1 - period(S) / period(0).

Every experiment with speedup 0 measures the unchanged program, whichever
line it selected, so the estimates here pool them all as the baseline
(coz's own viewer uses only the same line's).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...errors import PerflabError

# The fields each record type must have, with their types; others are kept as text.
_NUMERIC = {"time": int, "duration": int, "selected-samples": int, "delta": int, "arrivals": int,
            "departures": int, "difference": int, "count": int, "samples": int, "speedup": float}
_REQUIRED = {
    "startup": ("time",),
    "experiment": ("selected", "speedup", "duration"),
    "throughput-point": ("name", "delta"),
    "progress-point": ("name", "delta"),
    "latency-point": ("name", "arrivals", "departures", "difference"),
    "samples": ("location", "count"),
    "runtime": ("time",),
    "shutdown": ("time",),
}
_WRAPPED = 2**63  # an unsigned 64-bit duration this large was negative before coz printed it


@dataclass(frozen=True)
class LatencyPoint:
    arrivals: int
    departures: int
    difference: int  # transactions in flight (arrivals - departures) averaged over the experiment


@dataclass
class Experiment:
    selected: str  # FILE:LINE
    speedup: float
    duration: int  # ns, coz's pauses taken out
    selected_samples: int
    run: int  # which run in the file (0 = the first startup)
    throughput: dict[str, int] = field(default_factory=dict)  # progress point -> visits
    latency: dict[str, LatencyPoint] = field(default_factory=dict)


@dataclass
class Profile:
    experiments: list[Experiment] = field(default_factory=list)
    samples: dict[str, int] = field(default_factory=dict)  # FILE:LINE -> samples, all runs
    runs: int = 0
    runtime_ns: int = 0  # summed over runs
    warnings: list[str] = field(default_factory=list)

    def points(self) -> list[str]:
        """Every progress point any experiment saw."""
        names = {n for e in self.experiments for n in (*e.throughput, *e.latency)}
        return sorted(names)


def parse_record(line: str) -> dict:
    """One line as a dict with a "type" and typed fields; raises ValueError if it is not a record."""
    if line.startswith("{"):
        record = json.loads(line)
        if not isinstance(record, dict) or "type" not in record:
            raise ValueError("a JSON record needs a type")
        return record
    kind, *fields = line.split("\t")
    record: dict = {"type": kind}
    for item in fields:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"field {item!r} has no '='")
        if key == "type" and kind == "progress-point":
            key = "point-type"  # "type=source" would clobber the record's type
        record[key] = _NUMERIC[key](value) if key in _NUMERIC else value
    return record


def parse(text: str) -> Profile:
    """A whole profile.coz. Bad or cut-off lines become warnings, never exceptions."""
    profile = Profile()
    experiment: Experiment | None = None
    wrapped = 0
    dropped = False  # the current experiment was left out, so its points are too
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = parse_record(line)
            kind = record["type"]
            missing = [k for k in _REQUIRED.get(kind, ()) if k not in record]
            if kind not in _REQUIRED:
                raise ValueError(f"unknown record type {kind!r}")
            if missing:
                raise ValueError(f"no {', '.join(missing)} (a cut-off file?)")
        except (ValueError, KeyError) as e:
            profile.warnings.append(f"line {number} skipped: {e}")
            continue
        if kind == "startup":
            profile.runs += 1
            experiment, dropped = None, False
        elif kind == "experiment" and record["duration"] >= _WRAPPED:
            wrapped += 1
            experiment, dropped = None, True
        elif kind == "experiment":
            experiment = Experiment(record["selected"], record["speedup"], record["duration"],
                                    record.get("selected-samples", 0), max(profile.runs - 1, 0))
            profile.experiments.append(experiment)
            dropped = False
        elif kind in ("throughput-point", "progress-point", "latency-point"):
            if experiment is None:
                if not dropped:
                    profile.warnings.append(f"line {number} skipped: a progress point before any experiment")
            elif kind == "latency-point":
                experiment.latency[record["name"]] = LatencyPoint(record["arrivals"], record["departures"],
                                                                  record["difference"])
            else:
                experiment.throughput[record["name"]] = record["delta"]
        elif kind == "samples":
            profile.samples[record["location"]] = profile.samples.get(record["location"], 0) + record["count"]
        elif kind == "runtime":
            profile.runtime_ns += record["time"]
    if wrapped:
        profile.warnings.append(
            f"{wrapped} experiment(s) left out: coz wrote a negative duration (its pauses outlasted "
            "the experiment) as a huge unsigned number"
        )
    unseen = [e for e in profile.experiments if not e.throughput and not e.latency]
    if unseen:
        profile.warnings.append(f"{len(unseen)} experiment(s) without a progress point left out (the last one of a "
                                "cut-off file?)")
        profile.experiments = [e for e in profile.experiments if e.throughput or e.latency]
    return profile


def read(path: str | os.PathLike) -> Profile:
    try:
        return parse(Path(path).read_text())
    except OSError as e:
        raise PerflabError(f"cannot read the coz profile {path}: {e.strerror}; did `coz run` finish?") from None


def short_location(location: str) -> str:
    """/long/path/commit.c:44 -> commit.c:44."""
    return os.path.basename(location)


# ---------------------------------------------------------------- estimates


# ANCHOR: estimate
def _cost(experiment: Experiment, point: str) -> tuple[float, float]:
    """(numerator, denominator) of the point's cost per visit, so experiments pool by summing.

    Throughput: ns per visit = duration / delta. Latency (Little's law): mean
    latency = mean in flight / arrival rate = difference * duration / arrivals.
    Lower is better for both.
    """
    if point in experiment.throughput:
        return experiment.duration, experiment.throughput[point]
    if point in experiment.latency:
        p = experiment.latency[point]
        return p.difference * experiment.duration, p.arrivals
    return 0.0, 0.0


@dataclass(frozen=True)
class Estimate:
    """Predicted program speedup (1 - cost / baseline cost) with a bootstrap CI over experiments."""

    speedup: float  # the line's virtual speedup (bin centre)
    value: float
    low: float
    high: float
    experiments: int


def _pooled(costs: np.ndarray) -> np.ndarray:
    """Pooled cost per visit of each row of resampled (numerator, denominator) pairs."""
    return costs[..., 0].sum(axis=-1) / np.maximum(costs[..., 1].sum(axis=-1), 1e-12)


def predicted_speedup(baseline: list[Experiment], treated: list[Experiment], point: str,
                      resamples: int = 2000, seed: int = 0) -> Estimate | None:
    """1 - pooled cost(treated) / pooled cost(baseline), resampling experiments in both groups.

    None when either group has no visits of `point` (no estimate is possible).
    """
    def visited(experiments: list[Experiment]) -> np.ndarray:
        costs = [_cost(e, point) for e in experiments]
        return np.array([c for c in costs if c[1] > 0], dtype=float).reshape(-1, 2)

    base, test = visited(baseline), visited(treated)
    if len(base) == 0 or len(test) == 0:
        return None
    value = 1 - _pooled(test) / _pooled(base)
    rng = np.random.default_rng(seed)
    boot = 1 - _pooled(test[rng.integers(0, len(test), (resamples, len(test)))]) / \
        _pooled(base[rng.integers(0, len(base), (resamples, len(base)))])
    low, high = np.percentile(boot, [2.5, 97.5])
    speedup = float(np.mean([e.speedup for e in treated]))
    return Estimate(speedup, float(value), float(low), float(high), len(test))
# ANCHOR_END: estimate


def baseline_experiments(profile: Profile) -> list[Experiment]:
    return [e for e in profile.experiments if e.speedup == 0]


def curves(profile: Profile, point: str, bin_width: float = 0.2) -> dict[str, list[Estimate]]:
    """Each line's causal speedup curve: one estimate per bin of virtual speedups.

    Bins start at 0 (the baseline itself is not a bin); a line's curve leaves
    out bins with no experiments.
    """
    baseline = baseline_experiments(profile)
    edges = np.arange(bin_width, 1 + 1e-9, bin_width)
    by_line: dict[str, list[Experiment]] = {}
    for e in profile.experiments:
        if e.speedup > 0:
            by_line.setdefault(e.selected, []).append(e)
    result = {}
    for line, experiments in sorted(by_line.items()):
        estimates = []
        for high in edges:
            chosen = [e for e in experiments if high - bin_width < e.speedup <= high + 1e-9]
            estimate = predicted_speedup(baseline, chosen, point) if chosen else None
            if estimate:
                estimates.append(estimate)
        if estimates:
            result[line] = estimates
    return result


def near(profile: Profile, line: str, speedup: float, width: float = 0.1) -> list[Experiment]:
    """The line's experiments whose virtual speedup is within `width` of `speedup`."""
    return [e for e in profile.experiments if e.selected == line and abs(e.speedup - speedup) <= width + 1e-9]


def impact(estimates: list[Estimate]) -> float:
    """One number to rank lines by: the mean predicted speedup over the tried speedups (area / width)."""
    return float(np.mean([e.value for e in estimates])) if estimates else 0.0


def rank_lines(profile: Profile, point: str, min_experiments: int = 5) -> list[tuple[str, float]]:
    """Lines by causal impact, largest first; lines with fewer experiments than that are too noisy to rank."""
    ranked = [(line, impact(est)) for line, est in curves(profile, point).items()
              if sum(e.experiments for e in est) >= min_experiments]
    return sorted(ranked, key=lambda r: -r[1])


def time_saved(rate_ratio: float) -> float:
    """A batch-rate ratio (new / old) as the share of each batch's time saved: coz's unit."""
    return 1 - 1 / rate_ratio
