"""Build the C programs with the one shared build file, labs/common.mk, on demand."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Sequence

from . import processes
from .errors import PerflabError
from .paths import BUILD_DIR, REPO_ROOT


def _require_toolchain(compiler: str = "cc") -> None:
    if shutil.which("make") is None or shutil.which(compiler) is None:
        raise PerflabError(f"make or {compiler} is missing: run `make lab` (deps/debian.txt lists the compilers)")


def ensure_built(source_dir: str, program: str, target: str = "") -> Path:
    """Run make in `source_dir` (relative to the checkout), for `target` if given, and return
    build/<OUT>/<program>.

    make is idempotent and quick when nothing changed, so callers build every time.
    """
    _require_toolchain()
    folder = REPO_ROOT / source_dir
    done = processes.run(["make", "-s", "-C", str(folder), *([target] if target else [])])
    if done.returncode != 0:
        raise PerflabError(f"building {source_dir} failed: {done.stderr.strip().splitlines()[-1:]}; run `make -C "
                           f"{source_dir}{f' {target}' if target else ''}` to see why")
    out = processes.run(
        ["make", "-s", "--no-print-directory", "-C", str(folder), "-f", "Makefile", "-f", "-", "print-build"],
        input="print-build:\n\t@echo $(BUILD)\n",
    )
    binary = Path(out.stdout.strip() or BUILD_DIR) / program
    if not binary.exists():
        raise PerflabError(f"{binary} was not built; run `make -C {source_dir}` to see why")
    return binary


def compile_variant(source_dir: str, source: Path, output: Path, compiler: str = "cc",
                    extra_flags: Sequence[str] = ()) -> Path:
    """Build one C file with the flags of the lab in `source_dir` (its Makefile and labs/common.mk), then
    `extra_flags`, with `compiler`; return the binary. The flags are recorded in the binary's meta line."""
    _require_toolchain(compiler)
    done = processes.run(["make", "-s", "-C", str(REPO_ROOT / source_dir), "variant", f"SOURCE={source}",
                          f"OUTPUT={output}", f"CC={compiler}", f"EXTRA_CFLAGS={' '.join(extra_flags)}"])
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if "error" in line] or done.stderr.strip().splitlines()[-1:]
        raise PerflabError(f"{source.name} does not compile with {compiler} {' '.join(extra_flags)}: "
                           f"{errors[0] if errors else 'no message'}")
    return output
