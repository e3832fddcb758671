"""Results as versioned JSON files with raw samples and machine metadata.

Layout: results/<lab>/<UTC timestamp>-<kind>.json. Files are written to a
temporary name and renamed, so a crash or Ctrl-C never leaves half a file.

Every saved result carries its provenance: which perflab and which machine
(/etc/machine-id) wrote it, and a SHA-256 digest over everything else in it.
A grader that relies on a result checks the provenance first (`provenance_problems`):
a file typed by hand, edited afterwards or brought from another machine is
refused. It is a check against mistakes and shortcuts, not a signature: anyone
who can run perflab can write a result.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from . import processes
from .errors import PerflabError
from .paths import results_dir

RESULT_VERSION = 1


@functools.cache
def tool_versions() -> dict[str, str | None]:
    """First line of each tool's version, or None when it is not installed."""
    def first_line(argv: list[str]) -> str | None:
        if shutil.which(argv[0]) is None:
            return None
        try:
            done = processes.run(argv, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        lines = (done.stdout or done.stderr).strip().splitlines()
        return lines[0] if lines else None

    return {
        "python": platform.python_version(),
        "cc": first_line(["cc", "--version"]),
        "perf": first_line(["perf", "--version"]),
    }


def new_result(lab: str, kind: str, machine_summary: dict, params: dict[str, Any]) -> dict[str, Any]:
    return {
        "perflab_result_version": RESULT_VERSION,
        "lab": lab,
        "kind": kind,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_summary,
        "tools": tool_versions(),
        "params": params,
    }


def machine_id() -> str:
    """This installation's id (systemd's /etc/machine-id), or the host name where there is none."""
    try:
        return Path("/etc/machine-id").read_text().strip() or platform.node()
    except OSError:
        return platform.node()


def digest(result: dict[str, Any]) -> str:
    """SHA-256 over the result without its provenance and its own path, in a canonical JSON form."""
    body = {k: v for k, v in result.items() if k not in ("provenance", "path")}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def with_provenance(result: dict[str, Any], measured_on: str | None = None) -> dict[str, Any]:
    """The result with its provenance: this perflab, the machine it was measured on (this one unless told), its
    digest."""
    return {**result, "provenance": {"perflab": perflab_version(), "machine_id": measured_on or machine_id(),
                                     "sha256": digest(result)}}


@functools.cache
def perflab_version() -> str:
    try:
        return importlib.metadata.version("perflab")
    except importlib.metadata.PackageNotFoundError:
        return "not installed (run from a checkout)"


def provenance_problems(result: dict[str, Any]) -> list[str]:
    """Why a grader should not believe this result; [] when it was written here by perflab and left as it was."""
    found = result.get("provenance")
    if not isinstance(found, dict):
        return ["it has no provenance: it was not written by perflab (rerun the measurement)"]
    problems = []
    if found.get("sha256") != digest(result):
        problems.append("its samples or settings were changed after perflab wrote it (the digest differs)")
    if found.get("machine_id") != machine_id():
        problems.append("it was measured on another machine")
    return problems


def write_atomic(path: Path, text: str) -> None:
    """Write to a temporary file beside `path`, then rename: readers never see half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_writable(folder: Path) -> None:
    """Refuse before measuring, not after: a finished measurement must have somewhere to go."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as err:
        raise PerflabError(f"cannot write results to {folder} ({err.strerror}): make it writable, "
                           "or set PERFLAB_RESULTS to a folder you can write") from None


def save(result: dict[str, Any], folder: Path | None = None) -> Path:
    """Write the result atomically; return its path. If the folder fails after a measurement (a full disk),
    the result goes to the temporary folder instead of being lost, and a warning says where."""
    folder = Path(folder or results_dir() / result["lab"])
    try:
        return _save_in(result, folder)
    except OSError as err:
        rescue = Path(tempfile.gettempdir()) / "perflab-results" / result["lab"]
        rescue.mkdir(parents=True, exist_ok=True)
        path = _save_in(result, rescue)
        print(f"perflab: could not write to {folder} ({err.strerror}); the result is kept in {path}",
              file=sys.stderr)
        return path


def _save_in(result: dict[str, Any], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    stamp = result["created"].replace(":", "").replace("-", "").replace("+0000", "Z")
    path = folder / f"{stamp}-{result['kind']}.json"
    n = 1
    while path.exists():  # two results in the same second
        n += 1
        path = folder / f"{stamp}-{result['kind']}-{n}.json"
    write_atomic(path, json.dumps(with_provenance(result), indent=1) + "\n")
    return path


def load(path: str | os.PathLike) -> dict[str, Any]:
    """Read a result file, refusing files that are not perflab results of a known version."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise PerflabError(f"cannot read result {path}: {err}; pass a file written by `perflab run`") from None
    version = data.get("perflab_result_version") if isinstance(data, dict) else None
    if version != RESULT_VERSION:
        raise PerflabError(
            f"{path} is not a perflab result of version {RESULT_VERSION} (found {version!r}); rerun the measurement"
        )
    return data


def latest(lab: str, kind: str) -> Path | None:
    """The newest result of this lab and kind, if any."""
    found = sorted((results_dir() / lab).glob(f"*-{kind}*.json"))
    return found[-1] if found else None


def last_verdict(lab: str) -> str | None:
    """The verdict of this lab's newest saved run, if any (results without a verdict block are skipped)."""
    for path in sorted((results_dir() / lab).glob("*.json"), reverse=True)[:20]:
        try:
            verdict = json.loads(path.read_text()).get("verdict")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(verdict, dict) and "verdict" in verdict:
            return verdict["verdict"]
    return None
