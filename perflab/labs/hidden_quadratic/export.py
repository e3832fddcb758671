"""The exercises' program, export.c: built in any version (the learner's, a known fix), timed, profiled, fitted.

By construction export.c writes its CSV text with strcat(), which walks the
whole text from its start to find its end for every line it appends: O(n^2)
bytes read to write n lines, hidden at small n behind snprintf's per-line work.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tqdm.auto import tqdm

from ... import results, stats
from ...build import compile_variant, ensure_built
from ...errors import PerflabError
from ...grading.answers import learner_source_copy
from ...lock import measurement_lock
from ...paths import REPO_ROOT, RUN_BUILD_DIR
from ...runner import run_once
from . import profile
from .programs import SOURCE_DIR, sweep_lookups
from .run import LAB

EXPORT_SOURCE = REPO_ROOT / SOURCE_DIR / "export.c"
EXPORT_BUILD_DIR = RUN_BUILD_DIR / "09-hidden-quadratic" / "exercise"
EXPORT_SIZES = (1000, 2000, 4000, 8000)


def build_export(source_text: str, name: str) -> Path:
    """Compile a version of export.c with the lab's flags."""
    EXPORT_BUILD_DIR.mkdir(parents=True, exist_ok=True)
    source = EXPORT_BUILD_DIR / f"{name}.c"
    source.write_text(source_text)
    return compile_variant(SOURCE_DIR, source, EXPORT_BUILD_DIR / name)


def export_argv(binary: Path, sizes: tuple[int, ...], cpu: int, rotation: int = 0, min_ms: float = 0) -> list[str]:
    """Each size written at least three times and for at least min_ms (0: three times)."""
    return [str(binary), "-n", ",".join(map(str, sizes)), "-t", str(max(1, int(min_ms * 1e6))), "-r", str(rotation),
            "-C", str(cpu)]


def exercise_copy() -> Path:
    """The learner's own copy of export.c to edit, under results/ (made from the original the first time)."""
    return learner_source_copy(LAB.name, EXPORT_SOURCE)


def profile_export(n: int = EXPORT_SIZES[-1], seconds: float = 2) -> dict[str, int]:
    """perf record -g of the original export.c writing n records over and over: its folded stacks."""
    binary = ensure_built(SOURCE_DIR, "export")
    with measurement_lock(f"perflab {LAB.name} exercise"):
        return profile.record(export_argv(binary, (n,), LAB.placement_here(), min_ms=seconds * 1e3))


def time_versions(sources: dict[str, str], rounds: int, sizes: tuple[int, ...] = EXPORT_SIZES,
                  progress: bool = True) -> tuple[dict[str, dict[int, list[float]]], dict[str, dict[int, str]]]:
    """ns to write the text at each size, every version once per round in a rotated order: (times, digests)."""
    cpu = LAB.placement_here()
    binaries = {name: build_export(text, name.replace(" ", "-")) for name, text in sources.items()}
    names = list(binaries)
    times: dict[str, dict[int, list[float]]] = {name: {n: [] for n in sizes} for name in names}
    digests: dict[str, dict[int, str]] = {name: {} for name in names}
    with measurement_lock(f"perflab {LAB.name} exercise"):
        for r in tqdm(range(rounds), desc="timing the versions", disable=not progress, file=sys.stderr, leave=False):
            for name in names[r % len(names):] + names[:r % len(names)]:
                for s in run_once(export_argv(binaries[name], sizes, cpu, rotation=r))[1]:
                    times[name][s["n"]].append(s["ns_per_text"])
                    digests[name][s["n"]] = s["digest"]
    return times, digests


def fit(times_by_n: dict[int, list[float]], confidence: float = 0.95) -> stats.PowerLaw:
    """The scaling exponent of one version, over every round at every size."""
    return stats.power_law_fit([n for n, ts in times_by_n.items() for _ in ts],
                               [t for ts in times_by_n.values() for t in ts], confidence)


def sweep_result(rounds: int = 10, visit_ms: float = 1, progress: bool = True) -> dict:
    """The lab's lookup sweep alone, saved with its provenance: the crossover exercise's measurement."""
    machine = LAB.probe()
    cpu = LAB.placement_here(machine=machine)
    with measurement_lock(f"perflab {LAB.name} sweep"):
        samples = sweep_lookups(cpu, rounds, visit_ms, progress)
    result = results.new_result(LAB.name, "sweep", machine.summary(), {"cpu": cpu, "rounds": rounds,
                                                                       "visit_ms": visit_ms})
    result["sweep"] = samples
    result["path"] = str(results.save(result))
    return result


def known_fix(source: str) -> str:
    """Format each line straight after the last one: the text's length is kept, never searched for."""
    slow = ("    char line[MAX_LINE];\n    text[0] = '\\0';\n    for (long i = 0; i < n; i++) {\n"
            "        format_record(&records[i], line);\n        strcat(text, line);\n    }\n    return strlen(text);\n")
    if slow not in source:
        raise PerflabError("export.c no longer has the loop the known fix rewrites; update known_fix()")
    return source.replace(slow, "    size_t length = 0;\n    text[0] = '\\0';\n    for (long i = 0; i < n; i++)\n"
                                "        length += format_record(&records[i], text + length);\n    return length;\n")


def known_wrong_fix(source: str) -> str:
    """The hottest function at small n, made faster: digits written by hand instead of snprintf. The text is the
    same and the strcat() stays, so at large n it saves a few percent."""
    slow = '    return snprintf(line, MAX_LINE, "%u,%u,%u,%u\\n", r->id, r->src, r->dst, r->bytes);\n'
    if slow not in source:
        raise PerflabError("export.c no longer has the snprintf the known wrong fix replaces; update known_wrong_fix()")
    digits = ("static char *put_uint(char *p, uint32_t v)\n{\n    char digits[10];\n    int k = 0;\n"
              "    do {\n        digits[k++] = (char)('0' + v % 10);\n        v /= 10;\n    } while (v);\n"
              "    while (k)\n        *p++ = digits[--k];\n    return p;\n}\n\n")
    fast = ("    char *p = put_uint(line, r->id);\n    *p++ = ',';\n    p = put_uint(p, r->src);\n    *p++ = ',';\n"
            "    p = put_uint(p, r->dst);\n    *p++ = ',';\n    p = put_uint(p, r->bytes);\n    *p++ = '\\n';\n"
            "    *p = '\\0';\n    return (int)(p - line);\n")
    fixed = source.replace(slow, fast)
    return fixed.replace("__attribute__((noinline)) int format_record", digits + "__attribute__((noinline)) int "
                                                                                 "format_record", 1)
