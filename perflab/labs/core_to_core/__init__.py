"""Lab 1: core numbers lie about distance.

Measure the one-way latency between pairs of CPUs with the pingpong
benchmark, recover the machine's structure from the latency matrix (the
pinning advisor, also `perflab c2c analyze`), and check whether a
"sequential" pair (neighbours in CPU numbering) is really slower for two
communicating threads than the best pair the matrix shows.
"""

from .run import LAB

__all__ = ["LAB"]
