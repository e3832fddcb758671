"""Lab 8: page-aligned arrays run at half speed (4 KiB aliasing).

A load is first matched against the older stores in the store buffer by the
low 12 bits of its address; two arrays a multiple of 4 KiB apart match where
they should not, and on some cores the load waits. Part 1 sweeps one
store->load loop over the distance between its arrays modulo 4 KiB (scalar
and vectorised) to show which distances are slow here; part 2 races a
himeno-like stencil with its arrays page-aligned, as jemalloc places them,
against the same arrays padded; the hunt counts the PMU's event where there
is one; the source's runs are replayed in the figures.
"""

from .run import LAB

__all__ = ["LAB"]
