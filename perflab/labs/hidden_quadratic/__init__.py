"""Lab 9: Big O is not performance, and a quadratic hides until scale.

Part 1 looks a key up among n sorted keys four ways (a linear scan, binary
search, a tree, a linked list), swept over n: more work can take less time,
and the crossover is this machine's. Part 2 times a flow table's expiry pass,
written the O(n^2) way (ffs from the start of the bitstring for every flow it
frees, as FreeBSD's did), at four table sizes, fits its exponent on log-log
axes, finds it with perf record -g drawn as a flame graph, and races the fix.
"""

from .run import LAB

__all__ = ["LAB"]
