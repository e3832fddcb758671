"""Lab 3: interrupts land on a core that did not ask for them.

Part 1 (measured here, no root, no PMU): a victim thread spins on one CPU
while an aggressor on another CPU unmaps, protects or fences memory. When the
victim shares the aggressor's process, the kernel must interrupt its CPU
(a TLB shootdown or a function-call IPI) for every operation; in a separate
process, nothing does. Part 2 (measured here as root, on a single-queue
disk): reads from one CPU, completions where the disk's rq_affinity sends
them, counted in /proc/softirqs. Part 3 (as root) counts the kernel's
tracepoints for the same interrupts with perf, on every CPU. Part 4 replays
the counts of the original case, a trading system whose first core of a
socket took every block completion.
"""

from .run import LAB

__all__ = ["LAB"]
