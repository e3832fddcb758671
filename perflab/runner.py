"""Run benchmark binaries: interleaved, repeated, every raw sample kept.

A benchmark prints JSON lines (one "meta" line, then "sample" lines). The
runner runs several configurations round-robin, rotating the order each
round, so slow drift (frequency, a neighbour VM, thermal) hits every
configuration equally instead of biasing whichever ran last. A program that
must keep running between measurements (an aggressor, a neighbour) is an
Interactive one: orders on its stdin, JSON lines back.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
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


class Interactive:
    """A program in interactive mode (-i): orders on its stdin, JSON lines on its stdout; `with` it, and it is
    stopped however the block ends. It ends by itself at the end of its input, so closing stdin is its order to end.
    `ready` is the kind of record it prints once started (its "meta" or "params")."""

    ANSWER_TIMEOUT_S = 120

    def __init__(self, argv: list[str], ready: str):
        self.argv, self.ready = argv, ready
        self.process: subprocess.Popen | None = None
        self.started: dict = {}

    def __enter__(self):
        self.process = processes.start(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True, bufsize=1)
        try:
            self.started = self.read_until(self.ready)[-1]
        except BaseException:
            processes.stop(self.process, signal.SIGKILL)
            raise
        return self

    def __exit__(self, *exc) -> None:
        assert self.process is not None
        try:
            self.process.stdin.close()
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            processes.stop(self.process, signal.SIGKILL)  # whatever is left of it

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def order(self, text: str) -> None:
        assert self.process is not None
        self.process.stdin.write(f"{text}\n")
        self.process.stdin.flush()

    def read_until(self, kind: str) -> list[dict]:
        """Every record up to and including the first of `kind`."""
        assert self.process is not None
        name, records, deadline = Path(self.argv[0]).name, [], time.monotonic() + self.ANSWER_TIMEOUT_S
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                error = self.process.stderr.read().strip() or f"exit code {self.process.wait()}"
                raise PerflabError(f"{name} stopped: {error}")
            records.append(json.loads(line))
            if records[-1]["type"] == kind:
                return records
        raise PerflabError(f"{name} did not answer in {self.ANSWER_TIMEOUT_S} s: is its CPU overloaded?")
