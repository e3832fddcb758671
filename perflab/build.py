"""Build the C programs with the one shared build file, on demand."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from .errors import PerflabError
from .paths import BUILD_DIR, REPO_ROOT


def ensure_built(source_dir: str, program: str) -> Path:
    """Run make in `source_dir` (relative to the checkout) and return build/<OUT>/<program>.

    make is idempotent and quick when nothing changed, so callers build every time.
    """
    if shutil.which("make") is None or shutil.which("cc") is None:
        raise PerflabError("make or a C compiler is missing: run `make lab` (it installs build-essential)")
    folder = REPO_ROOT / source_dir
    done = subprocess.run(["make", "-s", "-C", str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        raise PerflabError(f"building {source_dir} failed: {done.stderr.strip().splitlines()[-1:]}; run `make -C {source_dir}` to see why")
    out = subprocess.run(
        ["make", "-s", "--no-print-directory", "-C", str(folder), "-f", "Makefile", "-f", "-", "print-build"],
        input="print-build:\n\t@echo $(BUILD)\n", capture_output=True, text=True,
    )
    binary = Path(out.stdout.strip() or BUILD_DIR) / program
    if not binary.exists():
        raise PerflabError(f"{binary} was not built; run `make -C {source_dir}` to see why")
    return binary
