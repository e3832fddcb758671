"""Lab 7: the hottest function is not the one to fix: causal profiling with coz.

Profile the commit program two ways: perf ranks functions by CPU time, coz
estimates how much each line would speed up the whole program. Then close
the loop: really halve the work of coz's top line and of perf's top
function, race both against the unchanged program in one interleaved run,
and put coz's predictions beside the measured speedups.
"""

from .run import LAB

__all__ = ["LAB"]
