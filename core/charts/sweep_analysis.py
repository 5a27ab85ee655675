"""Figures of a sweep's analysis: Optuna's own plots (`optuna.visualization`) in the
lab's look, and the lab's importance and learning-curve charts.

Each figure says which Optuna function draws or computes it. Optuna's are redrawn with
`layout.figure` (the lab's title, margins, legend and `uirevision`), their traces recoloured
from `style`; what Optuna computed (the best-so-far line, the contour's interpolation, a log
axis for a log-scaled knob) is kept as it drew it. Before a trial completes Optuna is not
asked: it has nothing to draw, and said so in the log ("There are no complete trials") at
every redraw of the page, three times a second; each chart says it instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import plotly.graph_objects as go

from core.charts.layout import NO_DATA, figure, log_ticks, said
from core.charts.style import HOVER_FORMAT, PALETTE, TICK_FORMAT
from core.charts.traces import Trace

if TYPE_CHECKING:
    import optuna

    from core.sweep.analysis import Importance, LearningCurve

#: The scale of a contour's values and a slice's trial numbers, as the parallel
#: coordinates' (bright is a high value).
COLOURSCALE: Final = "Viridis"
#: The outline of a trial's dot on a contour: the page's background.
TRIAL_OUTLINE: Final = {"color": "#171614", "width": 1}
#: A learning curve's colour by its trial's state.
STATE_COLOURS: Final = {
    "COMPLETE": PALETTE[1],
    "RUNNING": PALETTE[0],
    "PRUNED": PALETTE[2],
    "FAIL": PALETTE[6],
}
STATE_NAMES: Final = {
    "COMPLETE": "completed",
    "RUNNING": "training",
    "PRUNED": "pruned",
    "FAIL": "failed",
}
#: What a chart of Optuna's says before a trial completes.
NO_TRIAL_YET: Final = "no trial has completed yet"
#: Each importance method's bar colour.
METHOD_COLOURS: Final = {"fanova": PALETTE[0], "ped_anova": PALETTE[1]}


def history_figure(study: optuna.Study, target: str) -> go.Figure:
    """Each trial's value and the best so far, the study's direction deciding which is
    best: `optuna.visualization.plot_optimization_history`."""
    import optuna

    title = f"Optimization history: {target}"
    if not _completed(study):
        return figure("sweep/history", title, [], empty=NO_TRIAL_YET)
    drawn = optuna.visualization.plot_optimization_history(study, target_name=target)
    colours = {
        target: {"marker": {"color": PALETTE[1], "size": 7}, "name": "trial"},  # Optuna names it
        "Best Value": {"line": {"color": PALETTE[0], "width": 2}, "name": "best so far"},
    }
    return _restyled(drawn, "history", title, colours)


def edf_figure(study: optuna.Study, target: str) -> go.Figure:
    """The empirical distribution of the completed trials' values:
    `optuna.visualization.plot_edf`."""
    import optuna

    title = f"Distribution of {target} (EDF)"
    if not _completed(study):
        return figure("sweep/edf", title, [], empty=NO_TRIAL_YET)
    drawn = optuna.visualization.plot_edf(study, target_name=target)
    line = {"line": {"color": PALETTE[0], "width": 2}, "name": target, "showlegend": False}
    return _restyled(drawn, "edf", title, {"scatter": line})


def contour_figure(study: optuna.Study, x: str, y: str, target: str) -> go.Figure:
    """The value over two knobs, `x` across and `y` up, interpolated between the trials,
    on a log axis for a log-scaled knob: `optuna.visualization.plot_contour(study,
    params=[x, y])` (which orders the two by name: turned here when that puts `y`
    across). Raises `ValueError` if the study has no knob `x` or `y`."""
    import optuna

    key, title, height = f"contour/{x}/{y}", f"{target} over {x} and {y}", 420
    if not _completed(study):
        return figure(f"sweep/{key}", title, [], height=height, empty=NO_TRIAL_YET)
    drawn = optuna.visualization.plot_contour(study, params=[x, y], target_name=target)
    if drawn.layout.xaxis.title.text != x:
        drawn = _transposed(drawn)
    styles = {
        "contour": {"colorscale": COLOURSCALE, "colorbar": {"title": {"text": target}}},
        "Feasible Trial": {"marker": {"color": "#ffffff", "line": TRIAL_OUTLINE}},
    }
    return _restyled(drawn, key, title, styles, height)


def slice_figure(study: optuna.Study, knob: str, target: str) -> go.Figure:
    """Each trial's value against one knob, coloured by trial number (later is
    brighter): `optuna.visualization.plot_slice(study, params=[knob])`."""
    import optuna

    title = f"{target} against {knob}"
    if not _completed(study):
        return figure(f"sweep/slice/{knob}", title, [], empty=NO_TRIAL_YET)
    drawn = optuna.visualization.plot_slice(study, params=[knob], target_name=target)
    marker = {"marker": {"colorscale": COLOURSCALE, "line": {"width": 0}, "size": 8}}
    styles = {"Feasible Trial": marker}
    return _restyled(drawn, f"slice/{knob}", title, styles)


def importance_figure(
    found: Mapping[str, Sequence[Importance]], labels: Mapping[str, str], untold: str = ""
) -> go.Figure:
    """Each knob's importance by each method (`optuna.importance` on all trials, by
    `core.sweep.analysis.importances`), as bars with their bootstrap interval; the most
    important knob (by the first method) on top. `found`: method → importances;
    `labels`: method → its name on the chart; `untold`: why none is told, said on the
    chart when none is (`Importances.untold`)."""
    order = next((items for items in found.values() if items), [])
    knobs = [item.name for item in order][::-1]
    traces: list[Trace] = []
    for method, items in found.items():
        by_name = {item.name: item for item in items}
        shown = [by_name[k] for k in knobs if k in by_name]
        if not shown:
            continue
        trace: Trace = {
            "type": "bar",
            "orientation": "h",
            "name": labels[method],
            "y": [item.name for item in shown],
            "x": [item.value for item in shown],
            "marker": {"color": METHOD_COLOURS.get(method, PALETTE[2])},
            "hovertemplate": "%{y}: %{x:" + HOVER_FORMAT + "}<extra>%{fullData.name}</extra>",
        }
        if all(item.low is not None for item in shown):
            trace["error_x"] = {
                "type": "data",
                "symmetric": False,
                "array": [item.high - item.value for item in shown],  # type: ignore[operator]
                "arrayminus": [item.value - item.low for item in shown],  # type: ignore[operator]
                "color": "#e0e0e0",
                "thickness": 1.5,
            }
        traces.append(trace)
    chart = figure(
        "sweep/importance",
        "Knob importance, with 90% intervals",
        traces,
        xaxis={"title": {"text": "importance"}, "range": [0, 1.05], "hoverformat": HOVER_FORMAT},
        yaxis={"categoryorder": "array", "categoryarray": knobs, "automargin": True},
        height=max(220, 100 + 40 * len(knobs) * max(len(traces), 1)),
        empty=said(untold) if untold else NO_DATA["text"],
    )
    chart.update_layout(barmode="group")
    return chart


def learning_curve_figure(curves: Sequence[LearningCurve], target: str) -> go.Figure:
    """Each trial's reported values by step (`FrozenTrial.intermediate_values`, what
    `optuna.visualization.plot_intermediate_values` draws), coloured by the trial's state;
    a pruned trial ends in a cross where the pruner stopped it."""
    traces: list[Trace] = []
    legend: set[str] = set()
    for curve in curves:
        state = curve.state if curve.state in STATE_COLOURS else "FAIL"
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": curve.steps,
                "y": curve.values,
                "name": STATE_NAMES[state],
                "legendgroup": state,
                "showlegend": state not in legend,
                "line": {"color": STATE_COLOURS[state], "width": 1.5},
                "opacity": 0.9 if state in ("RUNNING", "PRUNED") else 0.6,
                "hovertemplate": f"trial {curve.number}<br>step %{{x:,}}<br>{target} "
                "%{y:" + HOVER_FORMAT + "}<extra></extra>",
            }
        )
        legend.add(state)
    stops = [(curve.number, curve.stopped_at) for curve in curves if curve.stopped_at]
    if stops:
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": [at[0] for _, at in stops],
                "y": [at[1] for _, at in stops],
                "name": "pruned here",
                "marker": {"symbol": "x", "size": 10, "color": STATE_COLOURS["PRUNED"]},
                "text": [f"trial {number}" for number, _ in stops],
                "hovertemplate": "%{text} pruned at step %{x:,}<extra></extra>",
            }
        )
    yaxis = {"title": {"text": target}, "tickformat": TICK_FORMAT}
    return figure("sweep/curves", f"Learning curves: {target} by trial", traces, yaxis=yaxis)


def _completed(study: optuna.Study) -> bool:
    """Whether a trial of the study has completed: before, Optuna has nothing to draw."""
    from optuna.trial import TrialState

    return bool(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))


def _restyled(
    drawn: go.Figure,
    key: str,
    title: str,
    styles: Mapping[str, Mapping[str, Any]],
    height: int = 340,
) -> go.Figure:
    """Optuna's figure `drawn` in the lab's layout, with its axes (titles, log types,
    ranges) and traces as Optuna made them, each trace updated by `styles[its name]`, else
    by `styles[its type]` (a contour, the lines of an EDF). Traces without a point are
    left out; a figure left without any (a contour of one trial) says "no data yet"."""
    traces: list[Trace] = []
    for trace in drawn.data:
        if not _drawn(trace):
            continue  # e.g. the contour of one trial: Optuna's empty scatter
        style = styles.get(trace.name) or styles.get(trace.type) or {}
        traces.append(_merged(trace.to_plotly_json(), style))
    xaxis, yaxis = (_axis(a.to_plotly_json()) for a in (drawn.layout.xaxis, drawn.layout.yaxis))
    return figure(f"sweep/{key}", title, traces, xaxis=xaxis, yaxis=yaxis, height=height)


def _axis(drawn: dict[str, Any]) -> dict[str, Any]:
    """An axis as Optuna drew it, with the lab's number formats; a log axis labels its
    decades as the lab's do (`log_ticks`), over the range Optuna gave it (in decades)."""
    axis = {"hoverformat": HOVER_FORMAT, "tickformat": TICK_FORMAT} | drawn
    if axis.get("type") == "category":
        axis.pop("tickformat")
    if axis.get("type") == "log":
        low, high = axis.get("range") or (None, None)
        axis |= log_ticks(None) if low is None else log_ticks(high - low, low)
    return axis


def _transposed(drawn: go.Figure) -> go.Figure:
    """`drawn` with its x and y swapped: each trace's coordinates (a contour's grid
    transposed) and the two axes."""
    traces = []
    for trace in drawn.data:
        spec = trace.to_plotly_json()
        spec["x"], spec["y"] = spec.get("y"), spec.get("x")
        if spec.get("z") is not None:
            spec["z"] = [list(row) for row in zip(*spec["z"], strict=True)]
        traces.append(spec)
    layout = drawn.layout.to_plotly_json()
    layout["xaxis"], layout["yaxis"] = layout.get("yaxis", {}), layout.get("xaxis", {})
    return go.Figure(data=traces, layout=layout)


def _drawn(trace: Any) -> bool:
    """Whether the trace has a point to draw."""
    return any(
        getattr(trace, axis, None) is not None and len(getattr(trace, axis)) for axis in "xz"
    )


def _merged(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `update`'s keys, nested mappings merged."""
    merged = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged
