"""Lab 5: one written global in .data/.bss, shared by every thread, caps a whole machine's throughput."""

from .run import LAB

__all__ = ["LAB"]
