"""The course's two manifests, read with the standard library alone: labs/manifest.toml (labs.py) and
exercises/manifest.toml (exercises.py).

A leaf of the import graph, below everything that names a lab or an exercise (the CLI, the lock's queue, the
workshop, the grader, the labs themselves), so reading a manifest never imports a lab, numpy or the probe
(tests/test_imports.py checks it).
"""
