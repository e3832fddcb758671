"""Plain-text output shared by the labs."""

from __future__ import annotations

from typing import Sequence


def table(rows: Sequence[Sequence[str]]) -> str:
    """Rows of cells (the first row is the header) as left-aligned columns two spaces apart."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)
