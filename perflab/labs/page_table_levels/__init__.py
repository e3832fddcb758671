"""Lab 4: 5-level page tables. The extra level costs on every minor fault: measured instruction-exact in two
emulated boots of one la57 CPU (with and without no5lvl), natively across a reboot, and replayed from the source."""

from .run import LAB

__all__ = ["LAB"]
