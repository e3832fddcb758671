"""Lab 10: a process using a few percent of RAM can slow everyone.

A victim chases pointers through memory (a far working set, well beyond the LLC, and a near one inside its
L2) beside a neighbour that is idle, computes, or streams stores through a 1 GiB buffer; the victim's time
per access is raced until decided, and the neighbour's bandwidth and every process's RSS are kept beside it:
the neighbour's memory use never changes, its traffic does. resctrl or the uncore watch the memory
controller where the machine has them; the lab says which.
"""

from .run import LAB

__all__ = ["LAB"]
