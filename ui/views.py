"""Runs as charts: what the Live and Compare pages draw, and how they lay it out."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from core.charts import RunView
from core.engine import Engine, RunStatus


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
