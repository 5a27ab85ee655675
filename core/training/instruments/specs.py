"""An instrument's charts, declared as plain data beside the instrument: which of a run's
metrics each chart draws, how, and how to read it. After Cockpit's quantity-and-gauge
pairs: `core.charts` draws any of these, so adding an instrument is one module.

The training process imports the instruments: this module names no plotting library,
only numpy. A series that is not a stored metric (e.g. 2/η) is a small numpy function of
the run, declared as a `Reference`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

Scale = Literal["linear", "log", "percent"]
Points = tuple[np.ndarray, np.ndarray]  # steps, and the value at each


class Logged(Protocol):
    """A run's metrics as a chart reads them (`core.store.Metrics` is one): the steps, and
    the series of each key, NaN where it was not logged."""

    @property
    def steps(self) -> np.ndarray: ...

    def __contains__(self, key: object) -> bool: ...

    def __getitem__(self, key: str) -> np.ndarray: ...


class Drawn(Protocol):
    """A run as a `Reference` reads it (`core.charts.RunView` is one)."""

    @property
    def metrics(self) -> Logged: ...

    @property
    def batch_size(self) -> int | None: ...


@dataclass(frozen=True)
class Line:
    """A metric of a run, drawn as a line (or markers), or as one line per layer.

    Attributes:
        key: The metric; with `per_layer`, the statistic of its series of each layer
            (`core.series.SeriesKey`).
        name: What the legend calls it, after the run's label (per layer: each layer's
            own name).
        markers, lines: Whether to draw a marker at each value, and lines between them.
        per_layer: One line per layer, each in its own colour: a chart of a single run.
        total: A sum over the layers drawn beside them: a neutral colour, and the name
            alone in the legend.
    """

    key: str
    name: str = ""
    markers: bool = False
    lines: bool = True
    per_layer: bool = False
    total: bool = False


@dataclass(frozen=True)
class Reference:
    """A dotted step line in a run's colour that the y range always covers (e.g. 2/η),
    drawn when the run's lines in the chart show something. `points` gives it at full
    resolution (the chart downsamples it), or None where the run has none."""

    name: str
    points: Callable[[Drawn], Points | None]


@dataclass(frozen=True)
class LineChart:
    """A chart of every run's lines.

    Attributes:
        title: Its title.
        help: How to read it, one sentence shown under it.
        lines: What each run draws in it.
        references: Lines each run draws beside its own (see `Reference`).
        scale: Its y axis: linear, log, or shares in percent.
        guides: Values marked by a dotted horizontal line, always in view.
        overlaid: What each run draws instead when several share the chart (e.g. a total
            in place of per-layer lines); empty: `lines`.
    """

    title: str
    help: str
    lines: tuple[Line, ...]
    references: tuple[Reference, ...] = ()
    scale: Scale = "linear"
    guides: tuple[float, ...] = ()
    overlaid: tuple[Line, ...] = ()


@dataclass(frozen=True)
class HeatStrip:
    """A heatmap of the first run's histograms of `kind` ("grad" or "weight", a key of
    `Measurements.histograms`): a band of magnitude bins per layer, steps across."""

    title: str
    help: str
    kind: str


ChartSpec = LineChart | HeatStrip
