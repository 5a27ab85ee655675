"""The Playground's paths, computed by one worker process per page server and kept.

The page server never imports TensorFlow or Keras (see `core.playground.worker`): its
`Worker` is a `st.cache_resource`, shared by every session and started as the page first
opens, so that TensorFlow loads there while the page paints. Each path is kept by its
arguments (`st.cache_data`, the `KEPT` most recent): a knob moved back, or a room's
viewers drawing what the presenter drew, costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st

from core.playground import Trajectory
from core.playground.worker import Worker

KEPT = 512  # paths kept: a few hundred kilobytes


# Released (its child ended) when the cache is cleared: a test's, a server's.
@st.cache_resource(show_spinner=False, on_release=Worker.close)
def worker() -> Worker:
    """The server's worker, its child started (TensorFlow loading there)."""
    started = Worker()
    started.start()
    return started


@st.cache_data(max_entries=KEPT, show_spinner=False)
def path(
    surface: str,
    optimizer: str,
    knobs: Mapping[str, Any],
    start: tuple[float, float],
    steps: int,
) -> Trajectory:
    """`core.playground.trajectory` of these arguments, from the worker (raises as it
    does: `InvalidInput`, `WorkerError`)."""
    return worker().trajectory(surface, optimizer, knobs, start, steps)
