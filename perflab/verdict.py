"""Every lab ends in a verdict: did this machine show the phenomenon?

- reproduced: the effect is there, significant, and larger than the smallest
  effect worth teaching;
- not-reproduced: the confidence interval rules out an effect that large;
- inconclusive: neither (the interval is too wide): more rounds would tell;
- cannot-show: this machine cannot show it at all (and what would).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

from . import stats

VERDICTS = ("reproduced", "not-reproduced", "inconclusive", "cannot-show")
# One colour per verdict, the same in the notebook, the report and the book.
COLOURS = {"reproduced": "#1a7f37", "not-reproduced": "#9a6700", "inconclusive": "#0969da", "cannot-show": "#6e7781"}
ALPHA = 0.05


@dataclass
class Effect:
    """The main effect a lab measures, a relative change or a difference, with its CI and p-value."""

    name: str
    value: float
    unit: str
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    confidence: float = 0.95  # of the CI: a sequential race's looks use more than 95%
    relative: bool = True  # a fraction of the baseline (shown in %), or a difference in `unit`
    min_effect: float | None = None  # the smallest effect worth teaching it was judged against, where one was

    def text(self) -> str:
        """"name: +7.2% (95% CI +4.9% to +9.6%, p = 2e-06)", or in the effect's unit when it is not relative:
        "name: +0.96 interrupts per operation (95% CI +0.91 to +1.01, p = 3e-09)"."""
        if self.relative:
            digits = 2 if max(abs(self.value), abs(self.ci_low), abs(self.ci_high)) < 0.01 else 1  # +0.23%, not +0.2%
            value, low, high = (f"{v:+.{digits}%}" for v in (self.value, self.ci_low, self.ci_high))
        else:
            value, low, high = f"{self.value:+.3g} {self.unit}", f"{self.ci_low:+.3g}", f"{self.ci_high:+.3g}"
        return f"{self.name}: {value} ({confidence_text(self.confidence)} CI {low} to {high}, p = {self.p_value:.2g})"


def confidence_text(confidence: float) -> str:
    """0.95 -> "95%", 0.99375 -> "99.38%", 0.99995 -> "99.995%": enough digits never to round to 100%."""
    for digits in range(4, 10):
        text = f"{100 * confidence:.{digits}g}"
        if text != "100" or confidence == 1:
            return f"{text}%"
    return f"{100 * confidence}%"


@dataclass
class Verdict:
    lab: str
    verdict: str
    reason: str
    effect: Effect | None = None
    results: str | None = None
    notes: list[str] = field(default_factory=list)
    # The result the verdict was judged from, in memory, for figures; its file is `results`.
    result: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"unknown verdict {self.verdict!r}")

    def to_json(self) -> dict[str, Any]:
        """Everything but the in-memory result: that is in the file `results` names."""
        return {
            "lab": self.lab,
            "verdict": self.verdict,
            "reason": self.reason,
            "effect": asdict(self.effect) if self.effect else None,
            "results": self.results,
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Verdict:
        effect = Effect(**data["effect"]) if data.get("effect") else None
        return cls(
            data["lab"], data["verdict"], data["reason"], effect, data.get("results"), list(data.get("notes", []))
        )

    def headline(self) -> str:
        return f"{self.lab}: {self.verdict.upper()} - {self.reason}"


# ANCHOR: judge_change
def judge_change(
    name: str,
    baseline: Sequence[float],
    treatment: Sequence[float],
    min_effect: float,
    statistic: Callable[[Sequence[float]], float] = stats.harmonic_mean,
    unit: str = "relative change",
    alpha: float = ALPHA,
    slowdown: float = 0.0,
) -> tuple[str, str, Effect]:
    """Decide whether `treatment` beats `baseline` by at least `min_effect` (a fraction, e.g. 0.03).

    The effect is statistic(treatment) / statistic(baseline) - 1, with a
    bootstrap CI at 1 - alpha; the p-value is Mann-Whitney's, which does not
    assume normal timings (they rarely are). Higher is better: pass rates, not
    times. A sequential race judges at a smaller alpha at each look (see
    perflab.sequential), so that looking often does not raise the error rate. `slowdown` is how much a
    neighbour may have slowed either arm (perflab.interference.slowdown): the interval is widened by it first.
    """
    low, high = stats.bootstrap_ratio_ci(baseline, treatment, statistic=statistic, confidence=1 - alpha)
    value = statistic(treatment) / statistic(baseline) - 1
    _, p = stats.mann_whitney_u(baseline, treatment)
    return _judged(Effect(name, value, unit, low - 1, high - 1, p, 1 - alpha, min_effect=min_effect), slowdown, alpha)
# ANCHOR_END: judge_change


# ANCHOR: judge_paired_change
def judge_paired_change(name: str, numerator: Sequence[float], denominator: Sequence[float], min_effect: float,
                        unit: str = "relative change", alpha: float = ALPHA,
                        slowdown: float = 0.0) -> tuple[str, str, Effect]:
    """Is numerator / denominator at least 1 + min_effect, round by round? Both arms ran in every round, one right
    after the other, so each round's ratio cancels what the host did to that round as a whole. The effect is the
    median ratio - 1, with a bootstrap CI at 1 - alpha; p is Wilcoxon's signed-rank test on the log ratios
    (two-sided), which assumes no shape for the timings. The i-th values of both arms come from the same round.
    `slowdown` as for judge_change."""
    ratios = [a / b for a, b in zip(numerator, denominator, strict=True)]
    low, high = stats.bootstrap_ci(ratios, stats.median, confidence=1 - alpha)
    logs = [math.log(r) for r in ratios]
    p = 1.0 if not any(logs) else stats.wilcoxon_signed_rank(logs)
    effect = Effect(name, stats.median(ratios) - 1, unit, low - 1, high - 1, p, 1 - alpha, min_effect=min_effect)
    return _judged(effect, slowdown, alpha)
# ANCHOR_END: judge_paired_change


# ANCHOR: beside
def widened(effect: Effect, slowdown: float) -> tuple[float, float]:
    """The effect's interval once either arm may have been slowed by up to `slowdown` (0.2: its times up to 20%
    longer, its rates that much lower) by something else on its CPU: the ratio of the arms moves by at most that
    factor, up or down."""
    return (1 + effect.ci_low) / (1 + slowdown) - 1, (1 + effect.ci_high) * (1 + slowdown) - 1


def decided_beside(effect: Effect, slowdown: float, alpha: float | None = None) -> str:
    """The verdict a relative effect's interval gives, widened by a neighbour's possible slowdown: reproduced only
    if even the effect the neighbour could least have inflated is worth teaching; not-reproduced only if even the
    effect it could most have hidden is not. The test's level is the interval's unless given."""
    low, high = widened(effect, slowdown)
    if effect.p_value < (1 - effect.confidence if alpha is None else alpha) and low >= effect.min_effect:
        return "reproduced"
    if high < effect.min_effect:
        return "not-reproduced"
    return "inconclusive"
# ANCHOR_END: beside


def _judged(effect: Effect, slowdown: float, alpha: float) -> tuple[str, str, Effect]:
    decided = decided_beside(effect, slowdown, alpha)
    shown = effect.text()
    if slowdown > 0:
        low, high = widened(effect, slowdown)
        shown += (f"; allowing for an arm slowed by up to {slowdown:.0%} by other programs on its CPU, "
                  f"{low:+.1%} to {high:+.1%}")
    if decided == "reproduced":
        return decided, shown, effect
    if decided == "not-reproduced":
        return decided, f"{shown}; an effect of {effect.min_effect:.0%} or more is ruled out", effect
    return decided, f"{shown}; too uncertain to decide", effect  # the caller knows what adds rounds


def unless_emulated(verdict: Verdict, machine: Any, needs: str) -> Verdict:
    """Turn a hardware lab's verdict into cannot-show when QEMU's TCG emulates the CPU.

    Under TCG the guest's instructions are recompiled into host code, with no caches, front end or
    core distances of their own, so whatever it measured is not the phenomenon. The measurement and
    the would-be verdict stay in the results and notes, for reading, not for concluding.
    """
    if not machine.emulated():
        return verdict
    return Verdict(verdict.lab, "cannot-show",
                   f"the CPU is emulated (QEMU's TCG), and {needs}; run on bare metal or in a KVM guest",
                   verdict.effect, verdict.results,
                   [f"as measured under TCG ({verdict.verdict}): {verdict.reason}", *verdict.notes], verdict.result)
