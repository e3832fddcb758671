"""Cases: an unknown slow program, found and fixed with the course's tools.

A case is sessiond, a small multi-threaded C service whose release 1.4 is slower than 1.3 for two or three
causes drawn from the labs' phenomena (those this machine can show). The learner measures, fixes service.c and
start.sh, names each cause in diagnosis.toml, and `perflab grade case` races the fix against the release.

The package, one file each:
- causes.py     the catalogue: each cause's kind, where it lives, its planted and fixed versions; the draw
- service/      sessiond's C: the harness (the course's, always), the service template, each part's versions
- source.py     a case's files from its causes: service.c, start.sh, the Makefile
- case.py       a case: its seed and machine, its folder in work/cases, `case new`, finding one by name
- diagnosis.py  what the learner hands in, read strictly: diagnosis.toml and start.sh's one start line
- build.py      building with the course's harness (service.c may define only its stages), running a build
- grade.py      the race and the credit per cause
- hints.py      the method first, then the part that still holds an unnamed cause
- reveal.py     the truth, and the generator's own fix (for `case reveal` and the author check)
- check.py      the cases' part of the author check
"""
