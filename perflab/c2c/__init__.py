"""Core-to-core latency: load matrices, recover the CPU topology, advise on pinning."""

from .analyze import analyze
from .matrix import LatencyMatrix, from_result, load, load_csv

__all__ = ["LatencyMatrix", "analyze", "from_result", "load", "load_csv"]
