"""A logged series, from its name to its chart, in one place: the one form of its stored
name (`SeriesKey`), the one downsampler that the store's summaries and the charts share
(`extremes`), and the y range to draw it in (`robust_range`). It imports nothing of the
lab's own: everything that logs, stores, draws or exports a series builds on it.

A statistic of the whole run is stored under its name (`loss`); one of a layer, a task or
an instrument's part under `<statistic>/<of>` (`update_ratio/dense1`, `loss/parity`,
`noise_scale/trace`, and a task's loss weight, the knob `task_weight/digit`), the tags
that TensorBoard groups by their prefix. A statistic's name holds no `/`, a layer's may
(Keras names a nested model's layer by its path, `inner/dense`): a key is cut at its first
`/`. Whether `of` is a layer, a task or a part follows from the statistic (a multi-task
model's heads are layers named after their tasks), so the string carries no kind.

A long series is cut into buckets of consecutive points, each kept as its lowest and its
highest point (as TensorBoard's and W&B's servers keep a range per bucket), so that a
one-step spike survives however far it is thinned: the store summarises a run so
(`core.store.summaries`) and reads a long one at `CHART_BUCKETS` buckets, and a chart cuts
what it draws to as many (`downsample`). Drawn as one line, the extremes of a long noisy
run zigzag into a solid band; `envelope` gives the buckets' means, to draw as a line, in a
band from their lowest to their highest.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

import numpy as np

# Names ------------------------------------------------------------------------------------

#: Between a statistic and what it is of, in a stored key.
SEPARATOR: Final = "/"


@dataclass(frozen=True)
class SeriesKey:
    """A logged series' name: a statistic, of the whole run (`of` None) or of one layer,
    task or part.

    Raises `ValueError` naming the key when the statistic is empty or holds a `/`, or
    `of` is empty: no stored string would read back as the same key.
    """

    statistic: str
    of: str | None = None

    def __post_init__(self) -> None:
        if not self.statistic or SEPARATOR in self.statistic:
            raise ValueError(
                f"series key {self.statistic!r} of {self.of!r}: a statistic's name is "
                f"not empty and holds no {SEPARATOR!r}"
            )
        if self.of == "":
            raise ValueError(f"series key {self.statistic!r}: `of` is a name or None, not ''")

    def format(self) -> str:
        """The stored string: `statistic`, or `statistic/of`."""
        return self.statistic if self.of is None else f"{self.statistic}{SEPARATOR}{self.of}"

    @classmethod
    def parse(cls, key: str) -> SeriesKey:
        """The key stored as `key` (cut at its first `/`): `parse(k).format() == k`.
        Raises `ValueError` naming `key` when it is empty, or empty before or after
        that `/`."""
        statistic, separator, of = key.partition(SEPARATOR)
        if not statistic or (separator and not of):
            raise ValueError(
                f"series key {key!r}: expected a statistic, or <statistic>{SEPARATOR}<of>"
            )
        return cls(statistic, of if separator else None)


def parsed(keys: Iterable[str]) -> dict[str, SeriesKey]:
    """The stored `keys` that are series keys, parsed, by key in their order. A key that
    does not parse is left out: a script's `fit` (`core.engine.callback`) may log any name,
    and a chart or an export of its run skips what it cannot place, rather than fail."""
    found = {}
    for key in keys:
        try:
            found[key] = SeriesKey.parse(key)
        except ValueError:
            continue
    return found


def logged_of(keys: Iterable[str], statistic: str) -> list[str]:
    """What `statistic` is logged of among the stored `keys`: the layers (tasks, parts)
    of its `<statistic>/<of>` series, in the order of `keys`."""
    return [
        key.of for key in parsed(keys).values() if key.statistic == statistic and key.of is not None
    ]


# Downsampling -----------------------------------------------------------------------------

#: The buckets a chart shows a series in, at most, two points each: 800 points, a bucket's
#: low and high for about every other pixel of a half-page chart (about 600 wide). More
#: would hardly show, and every point is sent to each open tab and drawn there every
#: second. The store reads a long run's summaries at this resolution
#: (`core.store.summaries.overview`), and a chart cuts any longer series to it.
CHART_BUCKETS: Final = 400


def extremes(lows: np.ndarray, highs: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Where each bucket holds its lowest value of `lows` and its highest of `highs`
    (`lows` by default): for arrays whose last axis runs over a bucket's points (NaN where
    nothing was logged), two integer arrays of the other axes, each the first such point.

    Infinite values count (a diverged loss is the highest), and a logged infinity is
    preferred to an unlogged point beside it. A bucket with nothing logged gets 0.
    """
    highs = lows if highs is None else highs
    # fmin and fmax skip NaN, and give NaN for a bucket of NaN only, where no point equals it.
    low = np.fmin.reduce(lows, axis=-1, keepdims=True)
    high = np.fmax.reduce(highs, axis=-1, keepdims=True)
    return np.argmax(lows == low, axis=-1), np.argmax(highs == high, axis=-1)


def downsample(
    steps: np.ndarray, values: np.ndarray, buckets: int = CHART_BUCKETS
) -> tuple[np.ndarray, np.ndarray]:
    """At most 2 · `buckets` of the logged points of (steps, values), spikes kept: every
    point when there are no more, else the first and the last, and the lowest and the
    highest of each of `buckets` − 1 buckets between (the ends take the room of one).

    NaN values (steps where the series was not logged) are dropped first. Infinite values
    are kept: a diverged loss must show.
    """
    keep = ~np.isnan(values)
    steps, values = steps[keep], values[keep]
    if len(values) <= 2 * buckets:
        return steps, values
    size = -(-len(values) // max(1, buckets - 1))  # points per bucket, ceil
    grid = _in_buckets(values, size)
    offsets = np.arange(len(grid)) * size
    low, high = extremes(grid)
    chosen = np.unique(np.concatenate([[0, len(values) - 1], offsets + low, offsets + high]))
    return steps[chosen], values[chosen]


@dataclass(frozen=True)
class Envelope:
    """A long series in buckets of consecutive points: each bucket's middle step, mean,
    lowest and highest value."""

    steps: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    size: int  # points per bucket


def envelope(
    steps: np.ndarray, values: np.ndarray, buckets: int = CHART_BUCKETS
) -> Envelope | None:
    """The logged points of (steps, values) in about `buckets` buckets (see `Envelope`);
    None when there are 2 · `buckets` or fewer, to be drawn whole, or when one is
    infinite: a diverged run's line shows its blow-up as it is (`downsample`)."""
    keep = ~np.isnan(values)
    steps, values = steps[keep], values[keep]
    if len(values) <= 2 * buckets or not np.isfinite(values).all():
        return None
    size = -(-len(values) // max(1, buckets))  # points per bucket, ceil
    grid = _in_buckets(values, size)
    middle = np.minimum(np.arange(len(grid)) * size + size // 2, len(values) - 1)
    low, high = extremes(grid)
    rows = np.arange(len(grid))
    mean = np.nanmean(grid, axis=1)
    return Envelope(steps[middle], mean, grid[rows, low], grid[rows, high], size)


def _in_buckets(values: np.ndarray, size: int) -> np.ndarray:
    """`values` as rows of `size` consecutive points; NaN pads the last row, so that every
    row has a logged point."""
    grid = np.full(-(-len(values) // size) * size, np.nan)
    grid[: len(values)] = values
    return grid.reshape(-1, size)


# Ranges -----------------------------------------------------------------------------------

# Share of points at each end that may lie beyond the middle of the data: a run that blows
# up over its last few logged steps, before the engine stops it, is at most that.
TAIL = 0.05
# How far the range may reach beyond that middle: half its extent, and at least a decade on
# a log axis or half the largest magnitude on a linear one, so that a spike of a few times
# the usual value, or a dip that the middle leaves out, stays in view.
MARGIN = 0.5
MIN_LOG_MARGIN = 1.0
MIN_LINEAR_MARGIN = 0.5
# Room left above and below the points, as a share of the range (Plotly's autorange: 5 %).
PADDING = 0.05


def robust_range(
    values: np.ndarray, *, log: bool = False, include: np.ndarray | None = None
) -> tuple[float, float] | None:
    """The y range to draw `values` in, in axis units (log₁₀ of the values on a log axis,
    as Plotly's `range` wants), with `PADDING` around; None when there is nothing to draw.

    The range spans the values, but reaches no further than a margin beyond their middle
    (the quantiles `TAIL` and 1 − `TAIL`): a run that diverges to 1e30 leaves the top of the
    chart instead of flattening the others into a line. Non-finite values, and on a log
    axis values ≤ 0, are ignored. Every finite value of `include` (a radius, a threshold
    to compare against) is always in the range.
    """
    values = _in_axis_units(values, log)
    extra = _in_axis_units(np.empty(0) if include is None else include, log)
    ends = [extra.min(), extra.max()] if len(extra) else []
    if len(values):
        low, high = np.quantile(values, [TAIL, 1 - TAIL])
        least = MIN_LOG_MARGIN if log else MIN_LINEAR_MARGIN * max(abs(low), abs(high))
        margin = max(MARGIN * (high - low), least)
        ends += [max(values.min(), low - margin), min(values.max(), high + margin)]
    if not ends:
        return None
    low, high = float(min(ends)), float(max(ends))
    # A flat series still gets some height: a tenth of a decade, or a tenth of its value.
    pad = PADDING * (high - low) or (0.1 if log else 0.1 * abs(high) or 1.0)
    return low - pad, high + pad


def _in_axis_units(values: np.ndarray, log: bool) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    return np.log10(values[values > 0]) if log else values
