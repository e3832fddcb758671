"""What every statistic checks first: enough finite samples, a confidence or probability in range; and
scipy.special, imported on first use."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..errors import PerflabError


def scipy_special():
    """scipy.special, imported on first use: the import takes 0.4 s, which a notebook kernel, grading or
    `perflab run` that imports the labs would otherwise pay before computing anything."""
    from scipy import special

    return special


def samples(xs: Sequence[float], need: int, purpose: str) -> list[float]:
    """xs as a list of finite floats with at least `need` items, else a PerflabError saying why."""
    if isinstance(xs, (str, bytes)):
        raise PerflabError(f"samples must be a sequence of numbers, got the text {xs!r:.60}")
    try:
        values = xs.tolist() if isinstance(xs, np.ndarray) else list(xs)
        values = [float(x) for x in values]
    except (TypeError, ValueError):
        raise PerflabError(f"samples must be a sequence of numbers, got {xs!r:.60}") from None
    if len(values) < need:
        raise PerflabError(
            f"need at least {need} sample{'s' if need > 1 else ''} to compute {purpose}, "
            f"got {len(values)}: run with more repetitions"
        )
    for i, x in enumerate(values):
        if not math.isfinite(x):
            raise PerflabError(f"sample {i} is {x}: drop failed runs before computing {purpose}")
    return values


def positive(xs: Sequence[float], need: int, purpose: str) -> list[float]:
    """Like _samples, but every value must be > 0 (rates, times)."""
    values = samples(xs, need, purpose)
    for i, x in enumerate(values):
        if x <= 0:
            raise PerflabError(f"{purpose} needs positive values, but sample {i} is {x}: check the measurement")
    return values


def check_confidence(confidence: float) -> None:
    """A confidence level is a probability strictly between 0 and 1 (0.95, not 95)."""
    if not 0 < confidence < 1:
        raise PerflabError(f"confidence must be between 0 and 1 (e.g. 0.95), got {confidence}")


def check_probability(p: float) -> None:
    """Quantile functions take p in [0, 1]."""
    if not 0 <= p <= 1:
        raise PerflabError(f"probability must be between 0 and 1, got {p}")


def check_df(df: float) -> None:
    """Student-t degrees of freedom: any positive float (Welch's df is fractional), or inf."""
    if not df > 0:
        raise PerflabError(f"degrees of freedom must be positive, got {df}")


