"""The Live page's training panels: loss and accuracy, the gradient norm against its clip,
the parameter norm against the radius, the learning rate, and per layer the step norm,
the update ratio and the sparsity (plus a regression's error and a multi-task run's
per-task series)."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from core.charts.drawing import Chart, draw
from core.charts.style import DASHES
from core.charts.traces import (
    RunView,
    Trace,
    compact,
    knob_reference,
    metric_line,
    per_layer,
    scatter,
)
from core.series import CHART_BUCKETS, SeriesKey, logged_of

#: The `meta` of a run's checkpoint markers, then its id.
CHECKPOINTS = "checkpoints:"


def training_figures(runs: Sequence[RunView]) -> dict[str, go.Figure]:
    """The training charts, every run overlaid: `loss`, `accuracy`, `grad_norm`,
    `param_norm`, `learning_rate`; when a run is a regression, `mae`; and when a run is
    multi-task, `task_loss` and `task_grad_norm`, each task's (its accuracy joins the
    accuracy chart)."""
    charts = {
        "loss": Chart("Loss", _loss, "log"),
        "accuracy": Chart("Accuracy", _accuracy, "percent"),
        "grad_norm": Chart("Gradient global norm, before and after clipping", _grad_norm, "log"),
        "param_norm": Chart("Parameter norm ‖θ'‖ before projection, and the radius", _param_norm),
        "learning_rate": Chart("Learning rate η of each step: its schedule and live changes", _lr),
    }
    if runs and all("mae" in run.metrics and "accuracy" not in run.metrics for run in runs):
        del charts["accuracy"]  # regressions only: no class to be right about
    if any("mae" in run.metrics for run in runs):  # a regression's
        charts |= {
            "mae": Chart(
                "Mean absolute error", functools.partial(_train_and_validation, key="mae"), "log"
            )
        }
    if any(logged_of(run.metrics.keys, "loss") for run in runs):  # a multi-task run's
        charts |= {
            "task_loss": Chart("Loss per task", per_layer("loss"), "log", split=True),
            "task_grad_norm": Chart(
                "Gradient norm per task, before weighting",
                per_layer("grad_norm"),
                "log",
                split=True,
            ),
        }
    return draw(charts, runs)


def layer_figures(runs: Sequence[RunView]) -> dict[str, go.Figure]:
    """The per-layer charts `step_norm`, `update_ratio` and `sparsity`: one chart under
    that key for a single run, or one per run under `<key>/<run id>` for several (but a
    single empty one under `<key>` while none of them has logged the series)."""
    return draw(
        {
            "step_norm": Chart(
                "Step norm ‖Δθ‖ per layer", per_layer("step_norm"), "log", split=True
            ),
            "update_ratio": Chart(
                "Update / parameter ratio ‖Δθ‖/‖θ‖ per layer",
                per_layer("update_ratio"),
                "log",
                split=True,
            ),
            "sparsity": Chart(
                "Sparsity per layer", per_layer("sparsity"), "percent", covers=(0, 1), split=True
            ),
        },
        runs,
    )


def live_figures(runs: Sequence[RunView]) -> dict[str, go.Figure]:
    """The training charts, then the per-layer ones (see both)."""
    return training_figures(runs) | layer_figures(runs)


# The traces of one run, per chart ---------------------------------------------------------


def _loss(run: RunView, i: int) -> list[Trace]:
    return _train_and_validation(run, i, "loss") + _checkpoint_markers(run, run.tint(i))


def _checkpoint_markers(run: RunView, colour: str) -> list[Trace]:
    """A diamond on the loss line at each of the run's checkpoints (at the loss last
    logged by then): where a fork can start."""
    if not run.checkpoints or "loss" not in run.metrics:
        return []
    logged = ~np.isnan(run.metrics["loss"])
    steps, loss = run.metrics.steps[logged], run.metrics["loss"][logged]
    at = np.asarray(run.checkpoints)
    last = np.searchsorted(steps, at, side="right") - 1  # the last logged step ≤ each
    drawn = last >= 0
    trace = scatter(
        run, "checkpoint", at[drawn], loss[last[drawn]], colour, mode="markers",
        meta=CHECKPOINTS + run.run_id,
    )  # fmt: skip
    trace["marker"] = {"color": colour, "size": 10, "symbol": "diamond-open"}
    trace["showlegend"] = False
    trace["hovertemplate"] = (
        f"{run.text} · checkpoint of step %{{x}}<br>Fork or Resume starts here<extra></extra>"
    )
    return [trace]


def _accuracy(run: RunView, i: int) -> list[Trace]:
    """The accuracy, and a multi-task run's other tasks' (dotted, after their name)."""
    traces = _train_and_validation(run, i, "accuracy")
    others = sorted(logged_of(run.metrics.keys, "accuracy"))
    for k, task in enumerate(others, start=1):  # in the run's colour, each a dash pair
        dashes = DASHES[2 * k % len(DASHES)], DASHES[(2 * k + 1) % len(DASHES)]
        train, validation = SeriesKey("accuracy", task), SeriesKey("val_accuracy", task)
        traces += metric_line(run, train.format(), task, run.tint(i), dash=dashes[0])
        traces += metric_line(
            run, validation.format(), f"{task} validation", run.tint(i), dash=dashes[1]
        )
    return traces


def _train_and_validation(run: RunView, i: int, key: str) -> list[Trace]:
    return [
        *metric_line(run, key, "train", run.tint(i)),
        *metric_line(run, f"val_{key}", "validation", run.tint(i), dash="dash", markers=True),
    ]


def _grad_norm(run: RunView, i: int) -> list[Trace]:
    traces = metric_line(run, "grad_norm", "before clipping", run.tint(i))
    if "clip_norm" in run.metrics:
        after = run.tint(i)
        traces += metric_line(run, "grad_norm_clipped", "after clipping", after, dash="dash")
        traces += knob_reference(run, "clip_norm", "clip threshold", run.tint(i))
    return traces


def _lr(run: RunView, i: int) -> list[Trace]:
    return metric_line(run, "learning_rate", "η", run.tint(i))


def _param_norm(run: RunView, i: int) -> list[Trace]:
    """‖θ'‖ before the projection, against the radius (runs logged before
    `param_norm_proposed` existed show ‖θ‖ after the projection)."""
    colour = run.tint(i)
    proposed = "param_norm_proposed" in run.metrics
    key = "param_norm_proposed" if proposed else "param_norm"
    if "radius" not in run.metrics:
        return metric_line(run, key, "‖θ‖", colour)
    return [
        *metric_line(
            run, key, "‖θ'‖ before projection" if proposed else "‖θ‖ after projection", colour
        ),
        *_projection_markers(run, key, colour),
        *knob_reference(run, "radius", "radius", run.tint(i)),  # drawn over the markers
    ]


def _projection_markers(run: RunView, key: str, colour: str) -> list[Trace]:
    """A cross on the norm series `key` where the projection began to act, once for each
    stretch of steps it acted on (which hovers its first and last step): a cross at every
    such step would make a band that hides the radius."""
    if "projection_active" not in run.metrics:
        return []
    starts, ends = projected_spans(run.metrics.steps, run.metrics["projection_active"])
    if len(starts) == 0:
        return []
    norms = run.metrics[key][np.searchsorted(run.metrics.steps, starts)]
    trace = scatter(run, "projected", starts, norms, colour, mode="markers")
    trace["marker"] = {"symbol": "x-thin", "size": 7, "line": {"width": 1.5, "color": colour}}
    trace["customdata"] = compact(ends)
    trace["hovertemplate"] = (
        f"{run.text} · projected onto the radius<br>"
        "from step %{x} to %{customdata}, from %{y}<extra></extra>"
    )
    return [trace]


def projected_spans(
    steps: np.ndarray, flags: np.ndarray, max_spans: int = CHART_BUCKETS // 2
) -> tuple[np.ndarray, np.ndarray]:
    """The first and last logged step of each stretch of logged steps where a 0/1 flag
    is 1 (steps not logged skipped), at most `max_spans` of them, evenly thinned."""
    logged = ~np.isnan(flags)
    steps, on = steps[logged], flags[logged] > 0.5
    edges = np.diff(np.concatenate([[False], on, [False]]).astype(np.int8))
    starts, ends = steps[edges[:-1] == 1], steps[np.flatnonzero(edges[1:] == -1)]
    if len(starts) > max_spans:
        chosen = np.linspace(0, len(starts) - 1, max_spans).astype(int)
        starts, ends = starts[chosen], ends[chosen]
    return starts, ends
