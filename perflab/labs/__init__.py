"""The labs, by stable short name. The number gives the folder: labs/NN-name/."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ..errors import PerflabError


@dataclass(frozen=True)
class Lab:
    number: int
    name: str
    title: str
    module: str | None  # None: planned, not in this version of the course

    @property
    def folder(self) -> str:
        return f"labs/{self.number:02d}-{self.name}"

    def load(self):
        if self.module is None:
            raise PerflabError(f"lab {self.name} is planned but not in this version of the course; available: {', '.join(available())}")
        return importlib.import_module(f".{self.module}", __name__)


LABS = [
    Lab(1, "core-to-core", "Core numbers lie about distance: core-to-core latency and pinning", "core_to_core"),
    Lab(2, "inclusive-llc", "An inclusive LLC evicts another core's L1", "inclusive_llc"),
    Lab(3, "first-core-ipi", "Interrupts land on a core that did not ask for them", None),
    Lab(4, "page-table-levels", "5-level page tables cost on every minor fault", None),
    Lab(5, "numa-static-data", "One written global caps a NUMA machine's throughput", None),
    Lab(6, "loop-alignment", "The same loop, shifted a few bytes, runs much slower", "loop_alignment"),
    Lab(7, "causal-profiling", "The hottest function is not the one to fix: causal profiling", "causal_profiling"),
]


def available() -> list[str]:
    return [lab.name for lab in LABS if lab.module]


def find(name: str) -> Lab:
    for lab in LABS:
        if lab.name == name:
            return lab
    raise PerflabError(f"unknown lab {name!r}; choose one of: {', '.join(available())} (or `all`)")
