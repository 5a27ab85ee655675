"""Downsampling of long metric series for plotting, keeping what matters to the eye.

A chart is a few hundred pixels wide; a run logs up to millions of steps. `downsample`
cuts a series into buckets of consecutive points and keeps, from each, the lowest and the
highest point in step order, plus the very first and last points: spikes (a gradient norm
blowing up for one step) survive, and so do the ends of the curve.
"""

from __future__ import annotations

import numpy as np

MAX_POINTS = 2000


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


def flags_to_steps(
    steps: np.ndarray, flags: np.ndarray, max_points: int = MAX_POINTS
) -> np.ndarray:
    """The steps where a 0/1 flag series is 1, thinned to at most `max_points` evenly."""
    on = steps[np.nan_to_num(flags) > 0.5]
    if len(on) <= max_points:
        return on
    return on[np.linspace(0, len(on) - 1, max_points).astype(int)]
