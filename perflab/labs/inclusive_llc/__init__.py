"""Lab 2: an inclusive last-level cache evicts another core's L1.

Predict from CPUID whether this machine's LLC is inclusive, then measure: a
victim chases pointers through a working set that fits in its L1 while an
aggressor on another core that shares the LLC streams over buffers from a
quarter of the LLC to twice its size. With an inclusive LLC the victim slows
down once the aggressor's buffer no longer fits: the LLC evicts the victim's
lines (it never sees the L1 hits that keep them hot) and takes them out of the
victim's L1 too. The verdict compares the victim with the largest aggressor
buffer against the victim with the smallest, so whatever else a busy
neighbour costs (a shared core, power, the memory controller) is in both.
"""

from .run import LAB

__all__ = ["LAB"]
