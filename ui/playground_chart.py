"""`playground_chart`: the Playground's race (`core.charts.playground.race_figure`) drawn
in place as the knobs move, played and scrubbed in the browser without a rerun, and
clicked to pick the start (see `ui/playground_chart.js`).

It reports back through the component's state, each change calling the page's callback
before the page runs again: `start`, `{"x", "y", "at"}` where the surface was clicked
(`at` a time, so that the same point clicked again is a change too), and, when
`report` asks for it, `step`, the step shown once a play or a drag of the slider ends,
and `play`, `{"from", "at"}` when ▶ Play starts a play at step `from`. Given such a
`play` (a presenter's, followed), the chart plays it too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from core.charts.playground import FRAME_MS
from ui import live_chart

_mount = st.components.v2.component(
    "optlab_playground_chart",
    js=(Path(__file__).with_name("playground_chart.js")).read_text(),
    isolate_styles=False,  # Plotly styles its hover labels and mode bar in the page's head
)


def playground_chart(
    figure: go.Figure,
    *,
    key: str,
    step: int | None,
    play: Mapping[str, Any] | None,
    report: bool,
    on_start: Callable[[], None],
    on_step: Callable[[], None],
    on_play: Callable[[], None],
) -> None:
    """Draws `figure` at `step` (None: the last), under `key`, playing `play` when it is
    new to the chart; a click on the surface calls `on_start`, and, if `report`, the end
    of a play or a drag calls `on_step` and the start of a play `on_play` (each reads
    what changed with `clicked`, `reported` and `played`)."""
    data: dict[str, Any] = {
        "figure": live_chart.drawn(figure),
        "config": live_chart.CONFIG,
        "plotly": live_chart.served_plotly(),
        "step": step,
        "play": play,
        "report": report,
        "frame_ms": FRAME_MS,
    }
    _mount(
        data=data,
        key=key,
        on_start_change=on_start,
        on_step_change=on_step,
        on_play_change=on_play,
    )


def _state(key: str) -> Mapping[str, Any]:
    value = st.session_state.get(key)
    return value if isinstance(value, Mapping) else {}


def clicked(key: str) -> tuple[float, float] | None:
    """Where the chart under `key` was clicked last, None if it never was."""
    start = _state(key).get("start")
    if not isinstance(start, Mapping):
        return None
    return float(start["x"]), float(start["y"])


def reported(key: str) -> int | None:
    """The step the chart under `key` showed when its last play or drag ended."""
    step = _state(key).get("step")
    return int(step) if isinstance(step, int | float) else None


def played(key: str) -> dict[str, int] | None:
    """The play the chart under `key` started last (`{"from": step, "at": ms}`), None if
    none did."""
    play = _state(key).get("play")
    if not isinstance(play, Mapping):
        return None
    return {"from": int(play["from"]), "at": int(play["at"])}
