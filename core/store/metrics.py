"""Metric series read back from the store, as columns aligned on steps."""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np


class Block(NamedTuple):
    """Consecutive rows that share one set of keys: `columns[i]` is the series `keys[i]`."""

    keys: tuple[str, ...]
    steps: np.ndarray  # int64, shape (n,), strictly increasing
    columns: np.ndarray  # float64, shape (len(keys), n); NaN where a value is missing

    def after(self, step: int) -> "Block":
        """The rows whose step is greater than `step`."""
        start = int(np.searchsorted(self.steps, step, side="right"))
        return Block(self.keys, self.steps[start:], self.columns[:, start:])

    def until(self, step: int) -> "Block":
        """The rows whose step is at most `step`."""
        end = int(np.searchsorted(self.steps, step, side="right"))
        return Block(self.keys, self.steps[:end], self.columns[:, :end])


@dataclass(frozen=True, slots=True)
class SeriesInfo:
    """What a run holds of one series, without its values (as TensorBoard's
    `ScalarTimeSeries` tells it): how many values were logged, NaN ones not counted, and
    the last step one was logged at (None when none was)."""

    count: int
    last_step: int | None


@dataclass(frozen=True)
class Metrics:
    """Scalar series of one run: `series[key][i]` is the value of `key` at `steps[i]`.

    Every array has the length of `steps`; a series holds NaN at steps where it was not
    logged (or was logged as NaN). Keys are in the order they first appeared.
    """

    steps: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    series: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def keys(self) -> tuple[str, ...]:
        """Names of the series, in the order they first appeared."""
        return tuple(self.series)

    @property
    def last_step(self) -> int | None:
        """The largest step, to pass as `since_step` on the next poll; None when empty."""
        return int(self.steps[-1]) if len(self.steps) else None

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, key: str) -> np.ndarray:
        return self.series[key]

    def __contains__(self, key: object) -> bool:
        return key in self.series

    def __iter__(self) -> Iterator[str]:
        return iter(self.series)

    def concat(self, newer: "Metrics") -> "Metrics":
        """These rows followed by `newer`'s, whose steps must all be greater than ours.

        Made for incremental polling: `m = m.concat(store.read_metrics(run, m.last_step))`.
        """
        if len(self) and len(newer) and newer.steps[0] <= self.steps[-1]:
            raise ValueError(
                f"newer metrics start at step {newer.steps[0]}, not after {self.steps[-1]}"
            )
        return stack([self.as_block(), newer.as_block()])

    def only(self, keys: Iterable[str]) -> "Metrics":
        """The series of `keys` that these rows hold, in the order of `keys`, without the
        rows where none of them has a value."""
        series = {key: self.series[key] for key in keys if key in self.series}
        if not series:
            return Metrics()
        logged = ~np.isnan(np.array(list(series.values()))).all(axis=0)
        return Metrics(self.steps[logged], {key: values[logged] for key, values in series.items()})

    def rows(self, start: int, stop: int) -> "Metrics":
        """Rows `start` to `stop` (excluded), by position."""
        series = {key: values[start:stop] for key, values in self.series.items()}
        return Metrics(self.steps[start:stop], series)

    def as_block(self) -> Block:
        """The rows as one `Block`."""
        columns = np.array(list(self.series.values()), np.float64)
        return Block(self.keys, self.steps, columns.reshape(len(self.series), len(self)))


def stack(blocks: Iterable[Block]) -> Metrics:
    """Put blocks, given in step order, one after another; keys are the union of theirs."""
    blocks = [block for block in blocks if len(block.steps)]
    positions: dict[str, int] = {}
    for block in blocks:
        for key in block.keys:
            positions.setdefault(key, len(positions))
    steps = np.concatenate([block.steps for block in blocks]) if blocks else np.empty(0)
    # One (keys × steps) matrix, so that every series is a contiguous row of it.
    out = np.full((len(positions), len(steps)), np.nan)
    start = 0
    for block in blocks:
        stop = start + len(block.steps)
        rows = np.array([positions[key] for key in block.keys], np.intp)
        out[rows, start:stop] = block.columns
        start = stop
    return Metrics(steps.astype(np.int64, copy=False), dict(zip(positions, out, strict=True)))
