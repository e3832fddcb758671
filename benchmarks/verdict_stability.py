"""Verdict stability: each lab's quick run, repeated, on this machine. How often does each verdict come out,
and how long does a quick run take?

usage: .venv/bin/python benchmarks/verdict_stability.py [LAB ...] [--repeat N] [--vm PROFILE] [--neighbour [LOADS]]
                                                        [--json]

A learner runs a lab once and believes its verdict, so a lab whose verdict
flips from run to run is a defect. The target: the same verdict in at least
9 of 10 quick runs on this machine, each quick run within 60 s. Every run is
a fresh `perflab run LAB --quick --json` process, as a learner would start
it, with its results kept in a folder of their own. The table printed at the
end is the one in the labs' READMEs; the raw verdicts and times are saved as
JSON next to it, with the probe's summary of the machine.

With --neighbour every round also runs each lab beside `stress-ng --cpu 1
--cpu-load L` pinned to the last of the CPUs the lab measures on, for each load
L (default 10 and 30 percent: an editor, another user's notebook), the order
rotated from round to round. A run beside one should give the quiet runs'
verdict (its notes say how much the neighbour could have moved it), or say
inconclusive with a reason that names the neighbour; the table counts each, and
the defects: another verdict that does not name it.

This is a benchmark, not a test: 10 runs of every lab take 10 to 20 minutes
(once more for each neighbour's load).

examples:
  .venv/bin/python benchmarks/verdict_stability.py
  .venv/bin/python benchmarks/verdict_stability.py loop-alignment --repeat 20
  .venv/bin/python benchmarks/verdict_stability.py --repeat 3 --json
  .venv/bin/python benchmarks/verdict_stability.py first-core-ipi --vm numa2   # each run boots the VM
  .venv/bin/python benchmarks/verdict_stability.py causal-profiling loop-alignment --neighbour
  .venv/bin/python benchmarks/verdict_stability.py numa-static-data --neighbour 10,30,60
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from perflab.formatting import table  # noqa: E402
from perflab.labs import available, find  # noqa: E402
from perflab.paths import results_dir  # noqa: E402
from perflab.probe import probe  # noqa: E402
from perflab.results import write_atomic  # noqa: E402

TARGET_SHARE, TARGET_SECONDS = 0.9, 60
NEIGHBOUR_LOADS = "10,30"  # percent of one CPU
# how a verdict names neighbours (perflab.interference): vetoed, or decided beside them
NAMED = ("the machine was busy", "neighbours could account for")
DECIDED_BESIDE = "decided beside neighbours"


def quick_run(lab: str, folder: Path, vm: list[str]) -> tuple[str, float, str]:
    """One `perflab run LAB --quick --json [--vm PROFILE]` as a learner would start it: (verdict, wall seconds,
    reason and notes, a line each)."""
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "perflab", "run", lab, "--quick", "--json", *vm], capture_output=True,
                          text=True, cwd=REPO, env={**os.environ, "PERFLAB_RESULTS": str(folder)}, timeout=900)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        return f"error: {done.stderr.strip().splitlines()[-1:]}", seconds, ""
    verdict = json.loads(done.stdout)
    return verdict["verdict"], seconds, "\n".join([verdict["reason"], *verdict["notes"]])


def neighbour_cpu(lab: str) -> int | None:
    """The last of the CPUs the lab watches with its default placement and options here; None if it watches none."""
    instance = find(lab).load()
    options = {name: values[0] for name, values in instance.OPTIONS.items()}
    watched = instance.watched_cpus(instance.placement_here(), **options)
    return max(watched) if watched else None


def beside_neighbour(lab: str, folder: Path, vm: list[str], load: int) -> tuple[str, float, str]:
    """A quick run while stress-ng keeps one of the lab's CPUs `load`% busy."""
    cpu = neighbour_cpu(lab)
    if cpu is None:
        return "no CPU to share", 0.0, ""
    neighbour = subprocess.Popen(["stress-ng", "--cpu", "1", "--cpu-load", str(load), "--taskset", str(cpu),
                                  "--timeout", "1h", "--quiet"], start_new_session=True)
    try:
        time.sleep(1)  # started and at its load before the lab measures
        return quick_run(lab, folder, vm)
    finally:
        os.killpg(neighbour.pid, signal.SIGKILL)
        neighbour.wait()


def summary_rows(runs: dict[str, list[tuple[str, float, str]]]) -> list[list[str]]:
    rows = [["lab", "runs", "verdicts", "most common", "median s", "max s", "target met"]]
    for lab, found in runs.items():
        counts = collections.Counter(verdict for verdict, _, _ in found)
        common, count = counts.most_common(1)[0]
        seconds = sorted(s for _, s, _ in found)
        met = count / len(found) >= TARGET_SHARE and seconds[-1] <= TARGET_SECONDS
        rows.append([lab, str(len(found)), ", ".join(f"{v} {n}" for v, n in counts.most_common()),
                     f"{common} {count}/{len(found)}", f"{seconds[len(seconds) // 2]:.0f}", f"{seconds[-1]:.0f}",
                     "yes" if met else "NO"])
    return rows


def neighbour_rows(quiet: dict[str, list], busy: dict[int, dict[str, list]]) -> list[list[str]]:
    """Beside each neighbour: how often the quiet runs' verdict came out (decided beside it, or never saw it), how
    often a verdict named it as what could account for it, and the defects: another verdict that did not name it."""
    rows = [["lab", "neighbour", "runs", "verdicts", "quiet verdict", "kept it", "kept, bound noted",
             "inconclusive naming it", "unnamed other verdict"]]
    for load, by_lab in busy.items():
        for lab, found in by_lab.items():
            quiet_verdict = collections.Counter(v for v, _, _ in quiet[lab]).most_common(1)[0][0]
            counts = collections.Counter(v for v, _, _ in found)
            named = [any(phrase in said.splitlines()[0] for phrase in NAMED) if said else False for _, _, said in found]
            rows.append([lab, f"{load}%", str(len(found)), ", ".join(f"{v} {n}" for v, n in counts.most_common()),
                         quiet_verdict, f"{counts[quiet_verdict]}/{len(found)}",
                         str(sum(v == quiet_verdict and DECIDED_BESIDE in said for v, _, said in found)),
                         str(sum(v == "inconclusive" and n for (v, _, _), n in zip(found, named))),
                         str(sum(v != quiet_verdict and not n for (v, _, _), n in zip(found, named)))])
    return rows


def neighbour_loads(parser: argparse.ArgumentParser, text: str) -> list[int]:
    """"10,30" -> [10, 30]: each a whole percentage of one CPU, 1 to 99 (stress-ng's --cpu-load)."""
    try:
        loads = [int(part) for part in text.split(",")]
    except ValueError:
        loads = []
    if not loads or any(not 1 <= load <= 99 for load in loads) or len(set(loads)) != len(loads):
        parser.error(f"--neighbour {text!r}: give loads in percent of one CPU, 1 to 99, each once (e.g. 10,30)")
    return loads


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("examples:")[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("labs", nargs="*", default=available(), help="labs to run (default: every ready lab)")
    parser.add_argument("--repeat", type=int, default=10, help="quick runs of each lab (default 10)")
    parser.add_argument("--vm", metavar="PROFILE", help="run each lab in this VM (vm/PROFILE.toml), booted per run")
    parser.add_argument("--neighbour", nargs="?", const=NEIGHBOUR_LOADS, metavar="LOADS",
                        help="also run each lab beside stress-ng at each of these percentages of one of its CPUs "
                             f"(default {NEIGHBOUR_LOADS})")
    parser.add_argument("--json", action="store_true", help="print the raw runs as JSON instead of the table")
    args = parser.parse_args()
    unknown = sorted(set(args.labs) - set(available()))
    if unknown or args.repeat < 1:
        parser.error(f"unknown lab {unknown[0]}" if unknown else "--repeat must be at least 1")
    loads = neighbour_loads(parser, args.neighbour) if args.neighbour is not None else []
    runs: dict[str, list[tuple[str, float, str]]] = {lab: [] for lab in args.labs}
    busy = {load: {lab: [] for lab in args.labs} for load in loads}
    vm = ["--vm", args.vm] if args.vm else []
    with tempfile.TemporaryDirectory(prefix="perflab-stability-") as folder:
        for round_ in range(args.repeat):  # labs take turns, so a slow hour of the host hits all of them
            for lab in args.labs:
                kinds = [(runs, None), *((busy[load], load) for load in loads)]
                turn = round_ % len(kinds)
                for found, load in kinds[turn:] + kinds[:turn]:  # rotate which goes first
                    found[lab].append(quick_run(lab, Path(folder), vm) if load is None else
                                      beside_neighbour(lab, Path(folder), vm, load))
                    label = "quiet" if load is None else f"beside stress-ng at {load}%"
                    print(f"[{round_ + 1}/{args.repeat}] {lab} ({label}): {found[lab][-1][0]} in "
                          f"{found[lab][-1][1]:.0f} s", file=sys.stderr, flush=True)
    record = {"created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "machine": probe().summary(), "vm": args.vm, "runs": runs,
              "beside_neighbour": {str(load): found for load, found in busy.items()} or None}
    out = results_dir() / "benchmarks" / f"verdict-stability-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%SZ}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1) if args.json else table(summary_rows(runs)))
    if busy and not args.json:
        print(table(neighbour_rows(runs, busy)))
    print(f"saved: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
