"""Lab 6: the same loop, shifted a few bytes, runs much slower.

Sweep one loop's start offset byte by byte (the bytes of the loop never
change), find the slow offsets, confirm the slowest against the fastest in a
fresh interleaved run, and check which boundary the slow offsets have in
common, from objdump's disassembly. Then build the seed's own program with
several compilers and flags and measure the builds side by side.
"""

from .run import LAB

__all__ = ["LAB"]
