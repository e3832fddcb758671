"""Where the course keeps its files: the checkout, the build output, the results."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = REPO_ROOT / "build"
LABS_DIR = REPO_ROOT / "labs"
DATA_DIR = Path(__file__).resolve().parent / "data"


def results_dir() -> Path:
    """Results go under results/ in the checkout unless PERFLAB_RESULTS says otherwise."""
    return Path(os.environ.get("PERFLAB_RESULTS", REPO_ROOT / "results"))
