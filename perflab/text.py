"""Plain-text output shared by the labs."""

from __future__ import annotations

import html
import re
from typing import Sequence


def table(rows: Sequence[Sequence[str]]) -> str:
    """Rows of cells (the first row is the header) as left-aligned columns two spaces apart."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def inline_html(text: str) -> str:
    """Plain text for an HTML page, with `command` spans (as verdicts and notes write them) shown as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))
