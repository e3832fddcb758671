"""Lab 2 as the seed measured it: stress-ng's victim alone and beside an LLC-sized stress-ng aggressor."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ... import processes, results, stats
from ...errors import PerflabError
from ...formatting import table
from ...lock import measurement_lock
from ...paths import scratch
from ...verdict import Effect, judge_change
from .run import ALONE, LAB, MIN_EFFECT, label, slowdown_text

BOGO_RATE = re.compile(r"bogo-ops-per-second-real-time:\s*([0-9.eE+-]+)")
WITH_AGGRESSOR = "with aggressor"
VICTIM_BYTES = 32 << 10  # the seed's victim: 32 KiB, inside any L1d


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


def _victim_rate(victim_cpu: int, aggressor_cpu: int | None, llc_bytes: int, seconds: int, yaml_path: Path) -> float:
    """One stress-ng victim run, beside a stress-ng aggressor unless aggressor_cpu is None."""
    aggressor = None
    if aggressor_cpu is not None:
        aggressor = processes.start(stress_ng_argv("read64", aggressor_cpu, llc_bytes, 10 * seconds + 60),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if aggressor is not None:
            time.sleep(1)  # let it map and touch its buffer first
        done = processes.run(stress_ng_argv("flip", victim_cpu, VICTIM_BYTES, seconds, yaml_path),
                             timeout=seconds + 60)
    finally:
        if aggressor is not None:
            processes.stop(aggressor, signal.SIGINT)
    if done.returncode != 0:
        raise PerflabError(f"stress-ng failed: {done.stderr.strip().splitlines()[-1:]}")
    return parse_bogo_rate(yaml_path.read_text())


def stress_ng_side_by_side(cpus: list[int] | None = None, quick: bool = True, runs: int | None = None,
                           progress: bool = True, wait: bool = True) -> dict[str, Any]:
    """The seed's measurement, alone and beside the aggressor in turn; saved and returned."""
    if runs is not None and runs < 2:
        raise PerflabError(f"stress-ng side by side needs at least 2 runs of each, not {runs}: a spread needs two")
    if shutil.which("stress-ng") is None:
        raise PerflabError("stress-ng is not installed: run `make lab` (deps/debian.txt lists it)")
    machine = LAB.probe()
    pair = LAB.placement_here(cpus, machine)
    settings = LAB.settings_for(quick)
    settings = replace(settings, stress_rounds=runs) if runs else settings
    rates: dict[str, list[float]] = {ALONE: [], WITH_AGGRESSOR: []}
    with measurement_lock(f"perflab {LAB.name} stress-ng", wait=wait), scratch("stress-ng") as folder:
        for r in tqdm(range(settings.stress_rounds * 2), desc="stress-ng victim", disable=not progress,
                      file=sys.stderr, leave=False):
            company = (ALONE, WITH_AGGRESSOR)[r % 2]
            rates[company].append(_victim_rate(pair.victim_cpu, None if company == ALONE else pair.aggressor_cpu,
                                               pair.llc_bytes, settings.stress_seconds, Path(folder) / "victim.yaml"))
    verdict, reason, effect = judge_rates(rates, "stress-ng victim's time per bogo op, beside the aggressor vs alone")
    result = results.new_result(LAB.name, "stress-ng", machine.summary(), {
        "victim_cpu": pair.victim_cpu, "aggressor_cpu": pair.aggressor_cpu, "llc_bytes": pair.llc_bytes,
        "commands": [stress_ng_argv("flip", pair.victim_cpu, VICTIM_BYTES, settings.stress_seconds),
                     stress_ng_argv("read64", pair.aggressor_cpu, pair.llc_bytes, settings.stress_seconds)],
        **asdict(settings)})
    result.update(bogo_ops_per_s=rates, verdict=verdict, reason=reason, effect=asdict(effect))
    result["path"] = str(results.save(result))
    return result


def seconds_per_op(rates: dict[str, list[float]]) -> dict[str, list[float]]:
    """Bogo ops per second -> seconds per op: higher is slower, like the lab's ns per access."""
    return {k: [1 / v for v in values] for k, values in rates.items()}


# ANCHOR: judge_rates
def judge_rates(rates: dict[str, list[float]], name: str) -> tuple[str, str, Effect]:
    """The victim's bogo ops/s alone and beside the aggressor, judged as the lab judges its own victim: its time
    per op (median) beside the aggressor at least MIN_EFFECT above alone, significantly."""
    per_op = seconds_per_op(rates)
    return judge_change(name, per_op[ALONE], per_op[WITH_AGGRESSOR], MIN_EFFECT, statistic=stats.median)
# ANCHOR_END: judge_rates


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
         f"{stats.median(rates[WITH_AGGRESSOR]):,.0f}", slowdown_text(per_op, WITH_AGGRESSOR, ALONE)),
    ]
    return table(rows)
