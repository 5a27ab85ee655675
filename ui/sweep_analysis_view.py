"""The Sweep page's analysis of the study picked: its history, the knobs' importances with
their intervals, a contour of two knobs picked here, a slice per knob, the distribution
of values, the trials' learning curves, and the written summary under them.

Drawn inside the page's study fragment, so it ticks with the trials while a sweep runs.
The importances (each evaluator on all trials, and its bootstrap resamples: the costly
part) are cached until another trial completes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from core.charts import sweep_analysis as charts
from core.escaping import escape_markdown
from core.sweep import Sweep
from core.sweep.analysis import (
    DEFAULT,
    METHODS,
    Importances,
    completed,
    importances,
    learning_curves,
    summary_lines,
)
from ui.live_chart import live_chart

if TYPE_CHECKING:
    import optuna
    import plotly.graph_objects as go


@st.cache_data(max_entries=64, show_spinner=False)
def _importances(
    storage: str, study_name: str, trials: tuple[int, ...], _study: optuna.Study
) -> dict[str, Importances]:
    """Each method's importances of the study whose completed trials are `trials` (the
    cache's key, with the storage and study: the figures change when a trial completes)."""
    return {method: importances(_study, method) for method in METHODS}


def analysis_view(sweep: Sweep) -> None:
    """The analysis of `sweep`'s study; nothing before its study exists."""
    study = sweep.study
    if study is None:
        return
    target = sweep.plan.objective.metric
    done = tuple(sorted(t.number for t in completed(study)))
    found = _importances(sweep.storage, sweep.study_name, done, study)
    st.subheader("Analysis", divider="gray")
    _two_a_row(
        {
            "history": charts.history_figure(study, target),
            "importance": charts.importance_figure(
                {method: told.knobs for method, told in found.items()},
                METHODS,
                found[DEFAULT].untold or "",
            ),
            "curves": charts.learning_curve_figure(learning_curves(study), target),
            "edf": charts.edf_figure(study, target),
        }
    )
    knobs = [axis.name for axis in sweep.plan.axes]
    ranked = [item.name for item in found[DEFAULT].knobs]
    knobs.sort(key=lambda name: ranked.index(name) if name in ranked else len(ranked))
    _contour(study, sweep.study_name, knobs, target)
    _two_a_row({f"slice:{knob}": charts.slice_figure(study, knob, target) for knob in knobs})
    lines = summary_lines(study, found[DEFAULT])
    st.markdown("\n".join(f"- {escape_markdown(line)}" for line in lines))


def _two_a_row(figures: dict[str, go.Figure]) -> None:
    """The figures, two a row, each a live chart under `chart:sweep:<its name>`."""
    named = list(figures.items())
    for row in range(0, len(named), 2):
        for column, (name, figure) in zip(st.columns(2), named[row : row + 2], strict=False):
            with column:
                live_chart(figure, key=f"chart:sweep:{name}")


def _contour(study: optuna.Study, study_name: str, knobs: list[str], target: str) -> None:
    """The contour of two knobs picked here (the two that matter most, at first)."""
    if len(knobs) < 2:
        st.caption("A contour needs two knobs: this sweep varies one.")
        return
    pick_x, pick_y, _ = st.columns([1, 1, 2])
    x = pick_x.selectbox("contour: x", knobs, index=0, key=f"sweep:contour:x:{study_name}")
    others = [knob for knob in knobs if knob != x]
    y = pick_y.selectbox("contour: y", others, index=0, key=f"sweep:contour:y:{study_name}")
    live_chart(charts.contour_figure(study, x, y, target), key="chart:sweep:contour")
