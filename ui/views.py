"""Runs as charts: what the Live and Compare pages draw, and how they lay it out."""

from __future__ import annotations

from collections.abc import Callable

import plotly.graph_objects as go
import streamlit as st

from core.charts import RunView
from core.engine import Engine, RunStatus
from ui import format


def run_view(engine: Engine, run: RunStatus) -> RunView:
    """A run's metrics and events, ready for `core.charts`."""
    return RunView(
        run.id,
        run.name,
        engine.metrics(run.id),
        engine.events(run.id),
        batch_size=run.config.get("batch_size"),
    )


def show_in_columns(figures: dict[str, go.Figure], captions: dict[str, str] | None = None) -> None:
    """Charts two by two, each keyed (so zoom survives refreshes), with its caption."""
    left, right = st.columns(2)
    for i, (key, figure) in enumerate(figures.items()):
        with left if i % 2 == 0 else right:
            st.plotly_chart(figure, key=f"chart:{key}")
            if captions and key in captions:
                st.caption(captions[key])


def pick_runs(
    engine: Engine,
    key: str,
    handed_over: str,
    default: Callable[[list[RunStatus]], list[str]],
) -> tuple[dict[str, RunStatus], list[str]]:
    """Every run by id, and the ones picked in a multiselect stored under `key`.

    Runs handed over by another page (session state `handed_over`) replace the pick; the
    first time, `default(runs)` picks; runs that no longer exist drop out.
    """
    if handed_over in st.session_state:
        st.session_state[key] = st.session_state.pop(handed_over)
    runs = {run.id: run for run in engine.list()}
    st.session_state.setdefault(key, default(list(runs.values())))
    st.session_state[key] = [run_id for run_id in st.session_state[key] if run_id in runs]
    picked = st.multiselect(
        "Runs", list(runs), key=key, format_func=lambda run_id: format.label(runs[run_id])
    )
    return runs, picked
