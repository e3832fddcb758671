"""Core-to-core latency matrices: one number (ns) per pair of CPUs.

Two ways in:

* the CSV that the `core-to-core-latency` tool writes with `--csv` (row i holds
  the one-way latency between CPU i and CPUs 0..i-1, the rest of the row is
  empty; no header);
* perflab's own result JSON, where ``data["matrix"]`` is
  ``{"cpus": [...], "one_way_ns": [[...], ...]}`` with ``null`` for pairs that
  were not measured.

An empty cell or `nan` in a CSV, and null or NaN in a JSON, mean "not
measured" (`inf` and negative latencies are refused). Whatever the source, a
`LatencyMatrix` is square, symmetric, NaN on the diagonal and NaN for every
pair that was not measured; a file whose matrix has fewer than half of its
pairs measured is refused, since advice from a few cells would look as sure as
advice from all of them.
"""

from __future__ import annotations

import json
import math
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...cpulist import format_cpulist
from ...errors import PerflabError

# The largest machines measured have a few hundred CPUs; 1024 leaves room and keeps an n x n float
# array at 8 MiB (a 50 MB CSV of one number a line once asked for 1.1 TiB). A 1024-CPU result JSON
# with full-precision floats is about 20 MB, hence the file limit.
MAX_CPUS = 1024
MAX_BYTES = 32 * 2**20
MIN_MEASURED = 0.5  # of the pairs, for a file to be read as a matrix


@dataclass(frozen=True, eq=False)
class LatencyMatrix:
    """Mean one-way latency in ns between pairs of CPUs.

    cpus: the CPU ids the rows/columns stand for (a run with `-C 2,5,7` covers only those).
    ns: n x n float array, symmetric, NaN on the diagonal and for pairs not measured.
    source: where it came from (a file name), for titles and messages.
    expected_cpus: how many CPUs the measurement was meant to cover, when the
        file says so and covers fewer (a partial CSV); None otherwise.
    """

    cpus: list[int]
    ns: np.ndarray
    source: str = ""
    expected_cpus: int | None = None

    def __post_init__(self) -> None:
        cpus = [int(c) for c in self.cpus]
        ns = np.array(self.ns, dtype=float)  # a private copy
        n = len(cpus)
        if ns.shape != (n, n):
            raise PerflabError(
                f"{self.source or 'latency matrix'}: {n} CPU ids but a {ns.shape} array; "
                "give one row and one column per CPU"
            )
        if len(set(cpus)) != n:
            raise PerflabError(f"{self.source or 'latency matrix'}: CPU ids repeat in {cpus}; list each CPU once")
        if np.any(np.isinf(ns)) or np.any(ns[np.isfinite(ns)] < 0):
            raise PerflabError(
                f"{self.source or 'latency matrix'}: latencies must be finite and >= 0 ns; "
                "use NaN/null for pairs that were not measured"
            )
        # Make it symmetric: a pair measured in one direction only counts for
        # both; measured both ways, the mean of the two.
        t = ns.T
        ns = np.where(np.isnan(ns), t, np.where(np.isnan(t), ns, (ns + t) / 2))
        np.fill_diagonal(ns, np.nan)
        ns.setflags(write=False)
        object.__setattr__(self, "cpus", cpus)
        object.__setattr__(self, "ns", ns)

    # -- queries -------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.cpus)

    def index(self, cpu: int) -> int:
        """Row/column of a CPU id; PerflabError if the matrix does not cover it."""
        try:
            return self.cpus.index(int(cpu))
        except ValueError:
            raise PerflabError(
                f"CPU {cpu} is not in {self.source or 'this matrix'} (it covers CPUs {format_cpulist(self.cpus)}); "
                "pick one of those"
            ) from None

    def latency(self, a: int, b: int) -> float:
        """One-way latency between CPU ids a and b in ns (NaN if not measured or a == b)."""
        return float(self.ns[self.index(a), self.index(b)])

    def pairs(self) -> list[tuple[int, int, float]]:
        """Every measured pair (a, b, ns) with a < b as CPU ids, sorted by (a, b)."""
        out = []
        for i, a in enumerate(self.cpus):
            for j, b in enumerate(self.cpus):
                if a < b and not math.isnan(self.ns[i, j]):
                    out.append((a, b, float(self.ns[i, j])))
        return sorted(out)

    def subset(self, cpus: list[int]) -> "LatencyMatrix":
        """The matrix restricted to these CPU ids (kept in this matrix's order)."""
        wanted = {int(c) for c in cpus}
        for c in wanted:
            self.index(c)  # raises for CPUs we do not cover
        idx = [i for i, c in enumerate(self.cpus) if c in wanted]
        return LatencyMatrix(
            [self.cpus[i] for i in idx], self.ns[np.ix_(idx, idx)], self.source, expected_cpus=self.expected_cpus
        )

    @property
    def measured_fraction(self) -> float:
        """Share of the off-diagonal pairs that were measured (1.0 for a full matrix)."""
        n = len(self.cpus)
        if n < 2:
            return 1.0
        return float(np.count_nonzero(~np.isnan(self.ns))) / (n * (n - 1))

    def to_json(self) -> dict:
        """{"cpus": [...], "one_way_ns": n x n lists, None where not measured} (as in result JSON)."""
        rows = [[None if math.isnan(v) else float(v) for v in row] for row in self.ns]
        return {"cpus": list(self.cpus), "one_way_ns": rows}


# -- loaders -----------------------------------------------------------------


def _cell_value(cell: str, where: str) -> float:
    """One CSV cell as ns; NaN if empty. `where` is "file:line N" for messages."""
    cell = cell.strip()
    if not cell:
        return math.nan
    try:
        value = float(cell)
    except ValueError:
        raise PerflabError(
            f"{where}: cell {cell[:20]!r} is not a number; every cell must be a latency in ns or empty"
        ) from None
    if math.isinf(value) or value < 0:
        raise PerflabError(f"{where}: latency {cell!r} is not a finite number >= 0; fix or empty that cell")
    return value


def load_csv(path: str | Path) -> LatencyMatrix:
    """Read the CSV that `core-to-core-latency --csv` writes.

    Row i (counting non-blank lines) holds CPU i's latency to CPUs 0..i-1;
    cells from i on must be empty. Tolerated: trailing empty cells, CRLF,
    blank lines, a missing final newline, empty cells (pairs not measured) and
    fewer rows than the row width announces (a partial run: only the CPUs with
    a row are covered). CPU ids are 0..k-1 for k rows.
    """
    path = Path(path)
    data = _read(path)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = "\0"
    if "\0" in text:  # not UTF-8, or NUL bytes that decode fine: an image, an archive, a core dump
        raise PerflabError(f"{path} is not a text CSV; give the file that core-to-core-latency --csv wrote")

    rows: list[tuple[int, list[float]]] = []  # (line number, values)
    width = 0
    leading_blank = False
    for lineno, line in enumerate(text.splitlines(), start=1):  # splitlines handles CRLF
        if not line.strip():
            leading_blank = leading_blank or not rows
            continue
        cells = line.split(",")
        width = max(width, len(cells))
        if max(width, len(rows) + 1) > MAX_CPUS:  # before the values (and the n x n array) take memory
            raise PerflabError(
                f"{path.name}: more than {MAX_CPUS} rows or columns (line {lineno}), but a matrix covers "
                f"at most {MAX_CPUS} CPUs; give the CSV that core-to-core-latency --csv wrote"
            )
        rows.append((lineno, [_cell_value(c, f"{path.name}: line {lineno}") for c in cells]))
    if not rows and not leading_blank:
        raise PerflabError(f"{path.name} is empty; give the CSV that core-to-core-latency --csv wrote")

    # For one CPU the tool writes row 0 as an empty line; more generally, if the
    # first non-blank row already has a value and a blank line came before it,
    # that blank line was row 0 (CPU 0 has no earlier CPU to pair with).
    first = 0
    if leading_blank and (not rows or not all(math.isnan(v) for v in rows[0][1])):
        first = 1
    n = len(rows) + first

    ns = np.full((n, n), np.nan)
    for k, (lineno, values) in enumerate(rows):
        i = k + first
        filled = [j for j, v in enumerate(values) if not math.isnan(v)]
        if filled and filled[-1] >= i:
            raise PerflabError(
                f"{path.name}: line {lineno} (CPU {i}) has a value in column {filled[-1] + 1}, but row i may only "
                f"hold the {i} latencies to CPUs 0..{i - 1}; the file must be the lower triangle, one row per CPU"
            )
        for j in filled:
            ns[i, j] = ns[j, i] = values[j]

    # Rows are padded to the full CPU count, so a wider row than there are rows
    # means the run stopped early (or was cut): say so through expected_cpus.
    expected = width if width > n else None
    return LatencyMatrix(list(range(n)), ns, path.name, expected_cpus=expected)


def from_result(data: dict, source: str = "") -> LatencyMatrix:
    """Build a LatencyMatrix from perflab's result JSON (``data["matrix"]``)."""
    name = source or (str(data.get("source") or "result JSON") if isinstance(data, dict) else "result JSON")
    try:
        block = data["matrix"]
        cpus = [int(c) for c in block["cpus"]]
        rows = block["one_way_ns"]
    except (KeyError, TypeError, ValueError, OverflowError):  # OverflowError: int(Infinity)
        raise PerflabError(
            f"{name}: no matrix in it; a result needs \"matrix\": {{\"cpus\": [...], \"one_way_ns\": [[...]]}}"
        ) from None
    n = len(cpus)
    if n > MAX_CPUS:
        raise PerflabError(f"{name}: {n} CPU ids, but a matrix covers at most {MAX_CPUS} CPUs; is this the right file?")
    if not isinstance(rows, list) or len(rows) != n or any(not isinstance(r, list) or len(r) != n for r in rows):
        raise PerflabError(f"{name}: one_way_ns must be {n} rows of {n} numbers (one per CPU id); use null for gaps")
    try:
        ns = np.array([[math.nan if v is None else float(v) for v in row] for row in rows], dtype=float).reshape(n, n)
    except (TypeError, ValueError, OverflowError):  # OverflowError: float() of a 400-digit integer
        raise PerflabError(
            f"{name}: one_way_ns holds something that is not a number or null; fix the result file"
        ) from None
    return LatencyMatrix(cpus, ns, name)


def _read(path: Path) -> bytes:
    """The file's bytes; PerflabError if it is not a regular file or is over MAX_BYTES (never read past that)."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):  # a directory, or a device or pipe that would be read forever
            raise PerflabError(
                f"{path} is not a file (a directory, device or pipe); give the .csv or .json file itself"
            )
        with path.open("rb") as file:
            data = file.read(MAX_BYTES + 1)  # never more: st_size may say 0 (in /proc) or the file may grow
    except OSError as exc:
        raise PerflabError(f"cannot read {path}: {exc.strerror or exc}; check the path") from None
    size = max(info.st_size, len(data))
    if size > MAX_BYTES:
        raise PerflabError(f"{path} is {size / 2**20:.0f} MiB or more; a latency matrix of up to {MAX_CPUS} CPUs "
                           f"is under {MAX_BYTES // 2**20} MiB: is this the right file?")
    return data


def load(path: str | Path) -> LatencyMatrix:
    """Load a .csv (core-to-core-latency) or .json (perflab result) by its suffix; refuse one mostly empty."""
    matrix = _load_by_suffix(Path(path))
    if matrix.measured_fraction < MIN_MEASURED:
        pairs = len(matrix) * (len(matrix) - 1) // 2
        measured = round(matrix.measured_fraction * pairs)
        raise PerflabError(f"{matrix.source}: only {measured} of its {pairs} pairs of CPUs are measured "
                           f"({matrix.measured_fraction:.0%}; empty, nan and null cells mean not measured): "
                           f"too few to read a structure from; give a matrix with at least {MIN_MEASURED:.0%} measured")
    return matrix


def _load_by_suffix(path: Path) -> LatencyMatrix:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return load_csv(path)
    if suffix == ".json":
        try:
            data = json.loads(_read(path).decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise PerflabError(f"{path.name} is not valid JSON ({exc}); give a perflab result file") from None
        except RecursionError:
            raise PerflabError(
                f"{path.name} nests too deeply to be a perflab result file; give a perflab result file"
            ) from None
        return from_result(data, source=path.name)
    raise PerflabError(f"{path.name}: unknown kind of file; give a .csv (core-to-core-latency) or a .json (perflab "
                       "result)")
