"""Downsampling of long metric series for plotting, keeping what matters to the eye.

A chart is a few hundred pixels wide; a run logs up to millions of steps. `downsample`
cuts a series into buckets of consecutive points and keeps, from each, the lowest and the
highest point in step order, plus the very first and last points: spikes (a gradient norm
blowing up for one step) survive, and so do the ends of the curve. Drawn as one line, those
extremes zigzag into a solid band on a long noisy run; `envelope` gives the same buckets'
means, to draw as a line, and their lowest and highest points, to draw as a band around it.
`robust_range` picks the y range to show such a series in, so that a few runaway points do
not flatten the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# A bucket's low and high for every other pixel of a half-page chart (about 600 wide): more
# would hardly show, and every point is sent to each open tab and drawn there every second.
MAX_POINTS = 800


def downsample(
    steps: np.ndarray, values: np.ndarray, max_points: int = MAX_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """At most about `max_points` of the finite points of (steps, values), spikes kept.

    NaN values (steps where the series was not logged) are dropped first. Infinite values
    are kept: a diverged loss must show.
    """
    keep = ~np.isnan(values)
    steps, values = steps[keep], values[keep]
    if len(values) <= max_points:
        return steps, values
    size = -(-len(values) // max(1, (max_points - 2) // 2))  # points per bucket, ceil
    buckets = -(-len(values) // size)
    # NaN pads the last bucket only, so every bucket has a point for nanargmin/nanargmax.
    grid = np.full(buckets * size, np.nan)
    grid[: len(values)] = values
    grid = grid.reshape(buckets, size)
    offsets = np.arange(buckets) * size
    low = offsets + np.nanargmin(grid, axis=1)
    high = offsets + np.nanargmax(grid, axis=1)
    chosen = np.unique(np.concatenate([[0, len(values) - 1], low, high]))
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
    steps: np.ndarray, values: np.ndarray, max_points: int = MAX_POINTS
) -> Envelope | None:
    """The finite points of (steps, values) in about `max_points` / 2 buckets (see
    `Envelope`); None when there are `max_points` or fewer, to be drawn whole, or when one
    is infinite: a diverged run's line shows its blow-up as it is (`downsample`)."""
    keep = ~np.isnan(values)
    steps, values = steps[keep], values[keep]
    if len(values) <= max_points or not np.isfinite(values).all():
        return None
    size = -(-len(values) // max(1, max_points // 2))  # points per bucket, ceil
    buckets = -(-len(values) // size)
    grid = np.full(buckets * size, np.nan)
    grid[: len(values)] = values
    grid = grid.reshape(buckets, size)
    middle = np.minimum(np.arange(buckets) * size + size // 2, len(values) - 1)
    low, high = np.nanmin(grid, axis=1), np.nanmax(grid, axis=1)
    return Envelope(steps[middle], np.nanmean(grid, axis=1), low, high, size)


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
