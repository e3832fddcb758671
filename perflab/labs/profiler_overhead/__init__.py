"""Lab 12: the profiler competes with what it profiles.

perf record -a reads every CPU's sample buffer from one thread, which runs
on the CPUs the workload needs; on a large NUMA server the source measured up
to 30% overhead, and pinning the reader (--affinity=cpu) took it away. The
lab runs the same CPU-bound work on every CPU, alone and under perf record
-a at two frequencies, with --affinity=cpu and with --aio, races them until
the overhead at 25 kHz and the affinity's gain are decided, and says where
perf's own threads ran. The source's table is replayed in the figures.
"""

from .run import LAB

__all__ = ["LAB"]
