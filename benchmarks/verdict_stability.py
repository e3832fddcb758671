"""Verdict stability: each lab's quick run, repeated, on this machine. How often does each verdict come out,
and how long does a quick run take?

usage: .venv/bin/python benchmarks/verdict_stability.py [LAB ...] [--repeat N] [--vm PROFILE] [--json]

A learner runs a lab once and believes its verdict, so a lab whose verdict
flips from run to run is a defect. The target: the same verdict in at least
9 of 10 quick runs on this machine, each quick run within 60 s. Every run is
a fresh `perflab run LAB --quick --json` process, as a learner would start
it, with its results kept in a folder of their own. The table printed at the
end is the one in the labs' READMEs; the raw verdicts and times are saved as
JSON next to it, with the probe's summary of the machine.

This is a benchmark, not a test: 10 runs of every lab take 10 to 20 minutes.

examples:
  .venv/bin/python benchmarks/verdict_stability.py
  .venv/bin/python benchmarks/verdict_stability.py loop-alignment --repeat 20
  .venv/bin/python benchmarks/verdict_stability.py --repeat 3 --json
  .venv/bin/python benchmarks/verdict_stability.py first-core-ipi --vm numa2   # each run boots the VM
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from perflab.labs import available  # noqa: E402
from perflab.paths import results_dir  # noqa: E402
from perflab.probe import probe  # noqa: E402
from perflab.results import write_atomic  # noqa: E402
from perflab.text import table  # noqa: E402

TARGET_SHARE, TARGET_SECONDS = 0.9, 60


def quick_run(lab: str, folder: Path, vm: list[str]) -> tuple[str, float]:
    """One `perflab run LAB --quick --json [--vm PROFILE]` as a learner would start it: (verdict, wall seconds)."""
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "perflab", "run", lab, "--quick", "--json", *vm], capture_output=True,
                          text=True, cwd=REPO, env={**os.environ, "PERFLAB_RESULTS": str(folder)}, timeout=900)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        return f"error: {done.stderr.strip().splitlines()[-1:]}", seconds
    return json.loads(done.stdout)["verdict"], seconds


def summary_rows(runs: dict[str, list[tuple[str, float]]]) -> list[list[str]]:
    rows = [["lab", "runs", "verdicts", "most common", "median s", "max s", "target met"]]
    for lab, found in runs.items():
        counts = collections.Counter(verdict for verdict, _ in found)
        common, count = counts.most_common(1)[0]
        seconds = sorted(s for _, s in found)
        met = count / len(found) >= TARGET_SHARE and seconds[-1] <= TARGET_SECONDS
        rows.append([lab, str(len(found)), ", ".join(f"{v} {n}" for v, n in counts.most_common()),
                     f"{common} {count}/{len(found)}", f"{seconds[len(seconds) // 2]:.0f}", f"{seconds[-1]:.0f}",
                     "yes" if met else "NO"])
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("examples:")[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("labs", nargs="*", default=available(), help="labs to run (default: every ready lab)")
    parser.add_argument("--repeat", type=int, default=10, help="quick runs of each lab (default 10)")
    parser.add_argument("--vm", metavar="PROFILE", help="run each lab in this VM (vm/PROFILE.toml), booted per run")
    parser.add_argument("--json", action="store_true", help="print the raw runs as JSON instead of the table")
    args = parser.parse_args()
    unknown = sorted(set(args.labs) - set(available()))
    if unknown or args.repeat < 1:
        parser.error(f"unknown lab {unknown[0]}" if unknown else "--repeat must be at least 1")
    runs: dict[str, list[tuple[str, float]]] = {lab: [] for lab in args.labs}
    with tempfile.TemporaryDirectory(prefix="perflab-stability-") as folder:
        for round_ in range(args.repeat):  # labs take turns, so a slow hour of the host hits all of them
            for lab in args.labs:
                runs[lab].append(quick_run(lab, Path(folder), ["--vm", args.vm] if args.vm else []))
                print(f"[{round_ + 1}/{args.repeat}] {lab}: {runs[lab][-1][0]} in {runs[lab][-1][1]:.0f} s",
                      file=sys.stderr, flush=True)
    record = {"created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "machine": probe().summary(), "vm": args.vm, "runs": runs}
    out = results_dir() / "benchmarks" / f"verdict-stability-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%SZ}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1) if args.json else table(summary_rows(runs)))
    print(f"saved: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
