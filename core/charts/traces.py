"""One run's traces: `RunView` (what a chart knows of a run) and the lines drawn from its
metrics, each downsampled to `series.CHART_BUCKETS` buckets, spikes kept, with every
name the user or the model's author chose shown as typed (`escape_html`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.charts.style import REFERENCE, layer_style, run_colour
from core.escaping import escape_html
from core.series import Envelope, SeriesKey, downsample, envelope, logged_of
from core.store import Event, Metrics

Trace = dict[str, Any]  # a Plotly trace, as the dict `go.Figure` takes
Traces = Callable[["RunView", int], list[Trace]]  # one run's, given its index in the chart


@dataclass(frozen=True)
class RunView:
    """One run to draw: a short label, its metrics and its events."""

    run_id: str
    label: str
    metrics: Metrics
    events: Sequence[Event] = ()
    batch_size: int | None = None  # drawn beside the gradient noise scale
    # A fork's: what its parent (and theirs) logged up to where it branched off, drawn
    # dotted in its colour before its own line.
    history: Metrics | None = None
    checkpoints: Sequence[int] = ()  # the steps it can be forked or resumed from
    colour: str | None = None  # its own on every chart (see `ColourBook`), if it has one

    @property
    def text(self) -> str:
        """The label as a chart shows it: as typed (see `escape_html`)."""
        return escape_html(self.label)

    def tint(self, index: int) -> str:
        """Its colour as the `index`-th run of a chart: its own, else the palette's
        `index`-th. A run has one colour on every chart, whatever else the chart shows:
        its series tell apart by their dashes, its layers by shades of it."""
        return self.colour or run_colour(index)


def metric_line(
    run: RunView,
    key: str,
    what: str,
    colour: str,
    *,
    dash: str = "solid",
    markers: bool = False,
    lines: bool = True,
    legend: str | None = None,
) -> list[Trace]:
    """The series `key` of `run`, downsampled, as a list of one trace (none if unlogged);
    for a fork, after its parent's line up to the fork, dotted."""
    if key not in run.metrics:
        return []
    spread = envelope(run.metrics.steps, run.metrics[key]) if lines and not markers else None
    if spread is not None:
        traces = [
            band(run, what, spread, colour, legend=legend),
            scatter(run, what, spread.steps, spread.mean, colour, dash=dash, legend=legend),
        ]
        traces[1]["hovertemplate"] = traces[1]["hovertemplate"].replace(
            "<br>", f" (mean of each {spread.size:,} logged points)<br>", 1
        )
        return _after_history(run, key, what, colour, traces)
    steps, values = downsample(run.metrics.steps, run.metrics[key])
    if len(steps) == 0:
        return []
    mode = "+".join(m for m, on in (("lines", lines), ("markers", markers)) if on)
    traces = [scatter(run, what, steps, values, colour, dash=dash, mode=mode, legend=legend)]
    return _after_history(run, key, what, colour, traces)


def _after_history(
    run: RunView, key: str, what: str, colour: str, traces: list[Trace]
) -> list[Trace]:
    """`traces` of the series `key`, after, for a fork, its parent's line up to the fork,
    dotted."""
    if run.history is not None and key in run.history:
        steps, values = downsample(run.history.steps, run.history[key])
        before = scatter(run, f"{what} before the fork", steps, values, colour, dash="dot")
        before["showlegend"] = False
        traces.insert(0, before)
    return traces


def band(
    run: RunView, what: str, spread: Envelope, colour: str, *, legend: str | None = None
) -> Trace:
    """The lowest and highest value of each bucket of `spread`, as a faint band (toggled
    with its line in the legend)."""
    x = np.concatenate([spread.steps, spread.steps[::-1]])
    y = np.concatenate([spread.high, spread.low[::-1]])
    trace = scatter(run, f"{what}, lowest to highest", x, y, colour, legend=legend)
    trace |= {"fill": "toself", "opacity": 0.25, "hoverinfo": "skip", "showlegend": False}
    trace["line"] = {"width": 0, "color": colour}
    trace["fillcolor"] = colour
    return trace


def layer_lines(
    run: RunView, index: int, statistic: str, *, markers: bool = False, lines: bool = True
) -> list[Trace]:
    """Traces of `statistic` of every layer (or task) of a run, the `index`-th of its
    chart, named by the layer alone, each in a shade of the run's colour and a dash of
    its own (`layer_style`)."""
    traces = []
    layers = logged_of(run.metrics.keys, statistic)
    for j, layer in enumerate(layers):
        colour, dash = layer_style(run.tint(index), j, len(layers))
        traces += metric_line(
            run,
            SeriesKey(statistic, layer).format(),
            layer,
            colour,
            dash=dash,
            markers=markers,
            lines=lines,
            legend=layer,
        )
    return traces


def per_layer(statistic: str) -> Traces:
    """A chart's `layer_lines` of `statistic` (a chart of layers draws a single run)."""
    return lambda run, i: layer_lines(run, i, statistic)


def knob_reference(run: RunView, key: str, what: str, colour: str) -> list[Trace]:
    """A knob's value over time (e.g. the radius), as a reference line."""
    if key not in run.metrics:
        return []
    steps, values = downsample(run.metrics.steps, run.metrics[key])
    return [reference(run, what, steps, values, colour)] if len(steps) else []


def reference(run: RunView, what: str, steps: np.ndarray, values: np.ndarray, colour: str) -> Trace:
    """A dotted step line that the y range always covers."""
    return scatter(run, what, steps, values, colour, dash="dot", shape="hv", meta=REFERENCE)


def scatter(
    run: RunView,
    what: str,
    steps: np.ndarray,
    values: np.ndarray,
    colour: str,
    *,
    dash: str = "solid",
    mode: str = "lines",
    shape: str = "linear",
    legend: str | None = None,
    meta: str | None = None,
) -> Trace:
    """A trace named `<run> · <what>` in the legend (or `legend`, in a chart of one run,
    which then toggles alone); hover values use the axes' formats. `what` and `legend`
    may be a layer's or a task's name, which the model's author chose: shown as typed."""
    what = escape_html(what)
    legend = None if legend is None else escape_html(legend)
    trace = {
        "type": "scatter",
        "x": compact(steps),
        "y": np.asarray(values, dtype=np.float32),
        "name": legend or f"{run.text} · {what}",
        "legendgroup": legend or run.run_id,
        "mode": mode,
        "line": {"color": colour, "dash": dash, "shape": shape, "width": 1.6},
        "marker": {"color": colour, "size": 5},
        "hovertemplate": f"{run.text} · {what}<br>%{{y}} at step %{{x}}<extra></extra>",
    }
    if meta is not None:
        trace["meta"] = meta
    return trace


def compact(steps: np.ndarray) -> np.ndarray:
    """Steps as 32-bit integers when they fit: Plotly ships arrays to the browser in their
    own width, and every open tab decodes them every second."""
    steps = np.asarray(steps)
    fits = steps.size == 0 or (steps.dtype.kind in "iu" and steps.max() < 2**31)
    return steps.astype(np.int32) if fits else steps
