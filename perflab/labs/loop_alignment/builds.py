"""Lab 6's builds: one C file compiled many ways (compilers, flags), each loop found in objdump and raced."""

from __future__ import annotations

import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ... import processes, results, stats
from ...build import compile_variant
from ...errors import PerflabError
from ...lock import measurement_lock
from ...paths import REPO_ROOT, RUN_BUILD_DIR
from ...runner import Config, interleave
from . import layout
from .run import LAB, SOURCE_DIR, Settings

SEED_SOURCE = REPO_ROOT / SOURCE_DIR / "seed.c"
SEED_BUILD_DIR = RUN_BUILD_DIR / "06-loop-alignment" / "seed"


@dataclass(frozen=True)
class Variant:
    """One build of a C file: a compiler and its flags."""

    name: str
    compiler: str
    flags: tuple[str, ...]

    @property
    def slug(self) -> str:
        return "".join(c if c.isalnum() else "_" for c in self.name).strip("_")


# ANCHOR: variants
SEED_VARIANTS = (
    Variant("gcc -O0", "gcc", ("-O0",)),
    Variant("gcc -O0, nop in foo", "gcc", ("-O0", "-DEXTRA_NOP")),
    Variant("gcc -O0 -falign-functions=16", "gcc", ("-O0", "-falign-functions=16")),
    Variant("gcc -O2", "gcc", ("-O2",)),
    Variant("gcc -O2, nop in foo", "gcc", ("-O2", "-DEXTRA_NOP")),
    Variant("gcc -O2 -falign-loops=64", "gcc", ("-O2", "-falign-loops=64")),
    Variant("gcc -O2 -Wa,-mbranches-within-32B-boundaries", "gcc", ("-O2", "-Wa,-mbranches-within-32B-boundaries")),
    Variant("clang -O2", "clang", ("-O2",)),
)
# ANCHOR_END: variants
SEED_BASELINE = "gcc -O2"


def build_variant(source: Path, variant: Variant, out_dir: Path) -> Path:
    """Compile `source` as `variant` into out_dir, with the lab's flags from labs/common.mk before the variant's."""
    if shutil.which(variant.compiler) is None:
        raise PerflabError(f"{variant.compiler} is not installed: run `make lab` (deps/debian.txt lists it)")
    return compile_variant(SOURCE_DIR, source, out_dir / variant.slug, variant.compiler, variant.flags)


def compiler_version(compiler: str) -> str:
    done = processes.run([compiler, "--version"])
    return done.stdout.splitlines()[0] if done.returncode == 0 and done.stdout else "unknown"


def seed_builds(variants: tuple[Variant, ...] = SEED_VARIANTS) -> tuple[dict[str, Path], list[str]]:
    """Build the seed program every way whose compiler is here; say which were skipped and why."""
    built, skipped = {}, []
    for variant in variants:
        if shutil.which(variant.compiler) is None:
            skipped.append(f"{variant.name}: {variant.compiler} is not installed (deps/debian.txt lists it; run `make "
                           "lab`)")
            continue
        built[variant.name] = build_variant(SEED_SOURCE, variant, SEED_BUILD_DIR)
    return built, skipped


def measure_builds(built: dict[str, Path], iterations: int, runs: int, cpu: int, desc: str,
                   progress: bool = True, wait: bool = True) -> dict[str, list[float]]:
    """ns per iteration of each build, the builds interleaved run by run, all pinned to one CPU."""
    configs = [
        Config(name, ["taskset", "-c", str(cpu), str(binary), str(iterations)]) for name, binary in built.items()
    ]
    with measurement_lock(f"perflab {LAB.name} {desc}", wait=wait):
        runs_by_build = interleave(configs, runs, desc=desc, progress=progress)
    return {name: run.values("ns_per_iter") for name, run in runs_by_build.items()}


def function_loop(binary: Path, function: str) -> layout.Loop:
    """The innermost loop of one function of a binary, from objdump."""
    return layout.find_loop(layout.disassemble(binary, [function])[function])


def seed_side_by_side(cpu: int | None = None, settings: Settings | None = None, progress: bool = True,
                      wait: bool = True) -> dict[str, Any]:
    """The seed program, every build in one interleaved run, with each build's loop layout. Saved."""
    machine = LAB.probe()
    settings = settings or LAB.QUICK
    cpu = LAB.placement_here([cpu] if cpu is not None else None, machine)
    built, skipped = seed_builds()
    layouts = {name: layout.describe(function_loop(binary, "main")) for name, binary in built.items()}
    times = measure_builds(built, settings.seed_iterations, settings.seed_runs, cpu, f"{len(built)} builds of seed.c",
                           progress, wait)
    result = results.new_result(LAB.name, "seed", machine.summary(), {"cpu": cpu, **asdict(settings)})
    result.update(
        layouts=layouts,
        ns_per_iter=times,
        skipped=skipped,
        compilers={c: compiler_version(c) for c in sorted({v.compiler for v in SEED_VARIANTS}) if shutil.which(c)},
    )
    result["path"] = str(results.save(result))
    return result


def seed_table(result: dict[str, Any]) -> str:
    """One row per build: where its loop sits, what it crosses, its time, and its speed against gcc -O2."""
    base = stats.median(result["ns_per_iter"][SEED_BASELINE]) if SEED_BASELINE in result["ns_per_iter"] else None
    rows = [
        f"{'build':<48} {'loop at':>8} {'bytes':>5} {'64B line':>8} {'jump@32B':>8} {'ns/iter':>8}  95% CI          "
        "vs -O2"
    ]
    for name, times in result["ns_per_iter"].items():
        shape = result["layouts"][name]
        low, high = stats.bootstrap_ci(times, stats.median) if len(times) >= 3 else (float("nan"), float("nan"))
        versus = f"{stats.median(times) / base:.2f}x" if base else ""
        rows.append(f"{name:<48} {'+' + str(shape['start_in_line']):>8} {shape['size']:>5} "
                    f"{'crosses' if shape['crosses 64-byte line'] else '-':>8} "
                    f"{'yes' if shape['jump crosses or ends on 32-byte boundary'] else '-':>8} "
                    f"{stats.median(times):>8.3f}  {low:.3f}-{high:.3f}    {versus}")
    return "\n".join(rows + [f"skipped: {s}" for s in result["skipped"]])
