"""Lab 11: the memcpy glibc picks for this CPU can be the slower one, for small copies.

glibc carries several memcpy implementations and its IFUNC resolver picks one
when a program loads, from the CPU's features. The lab names the variant this
machine gets (bpftrace's uprobes count its calls, as the source counted them
with funccount; glibc's debug symbols name it without root), reaches the other
variants by hiding features with GLIBC_TUNABLES, reads each one back, and races
them all at every size from 1 byte to 1 MiB until decided: reproduced when
another variant copies small buffers faster than the default. The source's
call counts before and after its upgrade are replayed in the figures.
"""

from .run import LAB

__all__ = ["LAB"]
