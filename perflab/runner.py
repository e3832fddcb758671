"""Run benchmark binaries: interleaved, repeated, every raw sample kept.

A benchmark prints JSON lines (one "meta" line, then "sample" lines). The
runner runs several configurations round-robin, rotating the order each
round, so slow drift (frequency, a neighbour VM, thermal) hits every
configuration equally instead of biasing whichever ran last.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from tqdm.auto import tqdm

from . import processes
from .errors import PerflabError

BENCH_TIMEOUT_S = 120


@dataclass
class Config:
    """One configuration to measure: a label and the command line that measures it."""

    label: str
    argv: list[str]


@dataclass
class Run:
    """Everything one configuration produced, in order, warm-up samples included."""

    label: str
    argv: list[str]
    meta: dict[str, Any] = field(default_factory=dict)
    samples: list[dict[str, Any]] = field(default_factory=list)

    def values(self, key: str) -> list[float]:
        """The measured values, warm-up samples left out."""
        return [s[key] for s in self.samples if not s.get("warmup")]

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "argv": self.argv, "meta": self.meta, "samples": self.samples}


def run_records(argv: list[str], timeout: float = BENCH_TIMEOUT_S) -> list[dict]:
    """Run one benchmark process; return every JSON record it printed, in order."""
    try:
        done = processes.run(argv, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise PerflabError(
            f"{' '.join(argv)} did not finish in {timeout:.0f} s: is a CPU overloaded or throttled? "
            "Rerun with fewer round trips or samples"
        ) from None
    if done.returncode != 0:
        message = done.stderr.strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        raise PerflabError(f"{argv[0].rsplit('/', 1)[-1]} failed: {message[0]}")
    return [json.loads(line) for line in done.stdout.splitlines()]


def run_once(argv: list[str], timeout: float = BENCH_TIMEOUT_S) -> tuple[dict, list[dict]]:
    """Run one benchmark process; return its meta record and its samples."""
    records = run_records(argv, timeout)
    meta = next((r for r in records if r.get("type") == "meta"), {})
    return meta, [r for r in records if r.get("type") == "sample"]


def interleave(
    configs: list[Config],
    rounds: int,
    desc: str = "measuring",
    progress: bool = True,
    on_round: Callable[[int, dict[str, Run]], None] | None = None,
) -> dict[str, Run]:
    """Run every configuration once per round, rotating the order each round."""
    runs = {c.label: Run(c.label, c.argv) for c in configs}
    bar = tqdm(total=rounds * len(configs), desc=desc, disable=not progress, file=sys.stderr, leave=False)
    try:
        for r in range(rounds):
            shift = r % len(configs)
            for config in configs[shift:] + configs[:shift]:
                meta, samples = run_once(config.argv)
                run = runs[config.label]
                run.meta = meta
                run.samples.extend(dict(s, round=r) for s in samples)
                bar.update()
            if on_round:
                on_round(r, runs)
    finally:
        bar.close()
    return runs
