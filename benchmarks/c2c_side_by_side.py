"""Side by side: perflab's pingpong against the core-to-core-latency crate, same machine, same pair.

usage: .venv/bin/python benchmarks/c2c_side_by_side.py [-C A,B] [--rounds N] [--json]

Matching tests: the crate's `-b 1` (compare-and-swap on one line) against
pingpong `-m cas`, and its `-b 2` (one writer, one reader, two lines) against
pingpong `-m two-lines`. A VM's host moves vCPUs, so the same pair's latency
can change several-fold within minutes: the two tools run alternately, round
by round, in one run. Each round gives one number per tool, the mean over
its samples (the crate's --csv reports the mean), and the medians of those
numbers over the rounds are compared. They agree when within 10%. Run it on
an idle machine: a mean takes every preempted sample at full weight.

This is a benchmark, not a test: it takes a minute or two and its numbers
belong in the lab's README. `make side-by-side` installs the crate and runs it.

examples:
  .venv/bin/python benchmarks/c2c_side_by_side.py
  .venv/bin/python benchmarks/c2c_side_by_side.py -C 0,1 --rounds 30 --json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from perflab import stats  # noqa: E402
from perflab.build import ensure_built  # noqa: E402
from perflab.cpulist import parse_cpulist  # noqa: E402
from perflab.lock import measurement_lock  # noqa: E402
from perflab.runner import run_once  # noqa: E402

CRATE = REPO / ".tools" / "bin" / "core-to-core-latency"
ROUND_TRIPS, SAMPLES = 1000, 300  # the crate's defaults
AGREEMENT = 0.10
MATCHING = {"1": "cas", "2": "two-lines"}


def crate_mean_ns(bench: str, a: int, b: int) -> float:
    """The crate's mean one-way latency for the pair, from its --csv output (row 1, cell 0)."""
    done = subprocess.run([str(CRATE), str(ROUND_TRIPS), str(SAMPLES), "-b", bench, "-c", f"{a},{b}", "--csv"],
                          capture_output=True, text=True, timeout=120, check=True)
    rows = [line.split(",") for line in done.stdout.strip().splitlines()]
    return float(rows[1][0])


def pingpong_mean_ns(binary: Path, mode: str, a: int, b: int) -> float:
    """The mean over samples, as the crate reports it (a median would shrug off preempted samples)."""
    _, samples = run_once(
        [str(binary), "-C", f"{a},{b}", "-m", mode, "-r", str(ROUND_TRIPS), "-s", str(SAMPLES), "-w", "1"]
    )
    return stats.mean([s["one_way_ns"] for s in samples if not s["warmup"]])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-C", "--cpus", default="0,1", help="the pair, like 0,1")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    a, b = parse_cpulist(args.cpus)[:2]
    if not CRATE.exists():
        sys.exit("side-by-side: the crate is not installed: run `make side-by-side`")
    binary = ensure_built("labs/01-core-to-core", "pingpong")
    rounds: dict[str, dict[str, list[float]]] = {bench: {"crate": [], "pingpong": []} for bench in MATCHING}
    with measurement_lock("side-by-side benchmark"):
        for r in range(args.rounds):
            for bench, mode in MATCHING.items():
                order = ["crate", "pingpong"] if r % 2 == 0 else ["pingpong", "crate"]  # neither always goes first
                for tool in order:
                    ns = crate_mean_ns(bench, a, b) if tool == "crate" else pingpong_mean_ns(binary, mode, a, b)
                    rounds[bench][tool].append(ns)
            print(f"round {r + 1}/{args.rounds}", file=sys.stderr, end="\r")
    report = {}
    for bench, mode in MATCHING.items():
        crate, ours = rounds[bench]["crate"], rounds[bench]["pingpong"]
        ratio = stats.median(ours) / stats.median(crate)
        report[f"-b {bench} vs -m {mode}"] = {
            "crate_median_ns": stats.median(crate), "pingpong_median_ns": stats.median(ours),
            "crate_range_ns": [min(crate), max(crate)], "pingpong_range_ns": [min(ours), max(ours)],
            "ratio": ratio, "agree_within_10pct": abs(ratio - 1) <= AGREEMENT, "rounds": rounds[bench],
        }
    if args.json:
        json.dump(
            {"cpus": [a, b], "round_trips": ROUND_TRIPS, "samples": SAMPLES, "results": report}, sys.stdout, indent=1
        )
        print()
    else:
        for name, r in report.items():
            print(
                f"{name}: crate {r['crate_median_ns']:.1f} ns (range "
                f"{r['crate_range_ns'][0]:.0f}-{r['crate_range_ns'][1]:.0f}), "
                f"pingpong {r['pingpong_median_ns']:.1f} ns (range "
                f"{r['pingpong_range_ns'][0]:.0f}-{r['pingpong_range_ns'][1]:.0f}), "
                f"ratio {r['ratio']:.3f}: {'agree' if r['agree_within_10pct'] else 'DISAGREE'}"
            )
    return 0 if all(r["agree_within_10pct"] for r in report.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
