"""What a figure reports: measured quantities, the target they are held to, and table rows.

A figure's target is declared once, next to its name, in `bench.figures`; the figure's code
only measures. `Row.met` is computed from the two, so no figure can mark itself as met.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from bench.timing import Paired

# SI prefixes for seconds, from the largest down.
_SECOND_SCALES = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
_BYTE_SCALES = ((1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1.0, "B"))


@dataclass(frozen=True)
class Quantity:
    """A measured value with its unit: `"s"`, `"B"` (bytes), or a rate such as `"steps/s"`."""

    value: float
    unit: str

    def __str__(self) -> str:
        return format_value(self.value, self.unit)


def format_value(value: float, unit: str) -> str:
    """`value` in `unit` with three significant digits, seconds and bytes scaled to a
    readable prefix: `0.0041 s` → `4.10 ms`, `2.5e6 B` → `2.50 MB`, `1234.5 rows/s` →
    `1,234 rows/s`."""
    if not math.isfinite(value):
        return f"{value} {unit}"
    if unit in ("s", "B"):
        scales = _SECOND_SCALES if unit == "s" else _BYTE_SCALES
        scale, prefixed = next(((s, name) for s, name in scales if abs(value) >= s), scales[-1])
        return f"{_three_digits(value / scale)} {prefixed}"
    if abs(value) >= 1000:
        return f"{value:,.0f} {unit}"
    return f"{_three_digits(value)} {unit}"


def _three_digits(value: float) -> str:
    """Three significant digits, without switching to exponent notation below 1000."""
    if value == 0:
        return "0"
    decimals = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


@dataclass(frozen=True)
class Target:
    """A bound that a row's ratio (or, with `on="a"`, its A value) must meet.

    Attributes:
        op: `">="` or `"<="`.
        bound: The bound, as a ratio, or in `unit` for an A value.
        on: `"ratio"` or `"a"`.
        unit: The unit of `bound` when `on="a"`.
    """

    op: Literal[">=", "<="]
    bound: float
    on: Literal["ratio", "a"] = "ratio"
    unit: str = ""

    def accepts(self, value: float) -> bool:
        """Whether `value` meets the bound; NaN never does."""
        return value >= self.bound if self.op == ">=" else value <= self.bound

    def judged_by(self, paired: Paired) -> bool:
        """Whether a ratio target's verdict is clear from `paired`: its ratios' whole
        spread meets the bound, or none of it does (more pairs would mostly narrow it,
        not move it across). An absolute target is not judged by pairs: never."""
        if self.on != "ratio":
            return False
        verdicts = {self.accepts(end) for end in paired.spread}
        return len(verdicts) == 1

    def __str__(self) -> str:
        symbol = "≥" if self.op == ">=" else "≤"
        if self.on == "ratio":
            return f"{symbol} {self.bound:.2f}×"
        return f"{symbol} {format_value(self.bound, self.unit)}"


@dataclass(frozen=True)
class Measured:
    """What a figure function returns: its measurements, and how to explain a miss.

    Attributes:
        a: The measured A (the lab's side), or the single value of an absolute figure.
        b: The measured B (the reference), if the figure compares two things.
        ratio: A relative to B, from the same pairs (see `bench.timing.Paired.ratio`).
        spread: The interquartile range of the pairs' ratios (`Paired.spread`): a ratio
            target is met only when all of it meets the target.
        pairs: The pairs the ratio is the median of, if it comes from pairs.
        diagnose: Returns one or two sentences on where A's time goes, from a profile;
            called only when the row misses its target, since profiling costs time.
        detail: Context worth printing with the row whether or not it is met.
    """

    a: Quantity
    b: Quantity | None = None
    ratio: float | None = None
    spread: tuple[float, float] | None = None
    pairs: int | None = None
    diagnose: Callable[[], str] | None = None
    detail: str = ""

    @classmethod
    def compared(cls, paired: Paired, unit: str, **rest: Any) -> Measured:
        """The medians of `paired`'s A and B samples (in `unit`), their ratio and its
        spread; `rest` are the other fields."""
        return cls(
            a=Quantity(paired.a_median, unit),
            b=Quantity(paired.b_median, unit),
            ratio=paired.ratio,
            spread=paired.spread,
            pairs=len(paired.a),
            **rest,
        )


class NotMeasured(Exception):
    """Raised by a figure function that cannot measure its figure here; the message says
    why (e.g. "core.charts missing"). The row then counts as not met."""


@dataclass(frozen=True)
class Row:
    """One line of the results table.

    Attributes:
        label: The figure's number, with a suffix for secondary rows (`"3 ref"`, `"6b"`).
        name: What is measured, saying which side is A and which is B.
        target: The bound the row is held to; `None` for rows reported without one.
        measured: The measurements; `None` when the figure could not be measured.
        note: Why it was not measured, or where the time goes when it misses.
    """

    label: str
    name: str
    target: Target | None
    measured: Measured | None
    note: str = ""

    @property
    def met(self) -> bool | None:
        """`None` for a row without a target; otherwise whether it was measured and meets
        it (a figure that could not be measured counts as not met)."""
        if self.target is None:
            return None
        if self.measured is None:
            return False
        if self.target.on == "a":
            return self.target.accepts(self.measured.a.value)
        ratio, spread = self.measured.ratio, self.measured.spread
        ends = spread if spread is not None else (ratio,)
        return ratio is not None and all(self.target.accepts(end) for end in ends)
