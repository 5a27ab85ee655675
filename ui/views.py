"""Runs as charts and panels: what the Live and Compare pages draw, and how they lay it out."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import plotly.graph_objects as go
import streamlit as st

from core.charts import RunView
from core.engine import RunStatus
from core.engine.client import EngineClient
from core.store import Metrics, UnknownRunError
from ui import texts

RUNS_PARAM = "runs"  # the URL query parameter that holds a page's selected run ids


def run_view(engine: EngineClient, run: RunStatus) -> RunView:
    """A run's metrics and events, ready for `core.charts`; a fork's with its history."""
    return RunView(
        run.id,
        run.name,
        engine.metrics(run.id),
        engine.events(run.id),
        batch_size=run.config.get("batch_size"),
        history=history(engine, run),
        checkpoints=[checkpoint.step for checkpoint in engine.checkpoints(run.id)],
    )


def history(engine: EngineClient, run: RunStatus) -> Metrics | None:
    """What a fork's ancestors logged up to where it branched off, oldest first; None
    for a run that is not a fork (or whose parent was deleted)."""
    if run.parent is None or run.forked_at is None:
        return None
    try:
        parent = engine.status(run.parent)
    except UnknownRunError:
        return None
    mine = engine.metrics(parent.id).until(run.forked_at)
    earlier = history(engine, parent)
    return mine if earlier is None else earlier.concat(mine)


def family(runs: Mapping[str, RunStatus], run_id: str) -> list[str]:
    """The run's root ancestor and every run forked from it, at any depth, oldest first:
    the "what-if" view of a run."""
    root = run_id
    while (parent := runs[root].parent) in runs:
        root = parent
    members, frontier = [root], [root]
    while frontier:
        children = [r.id for r in runs.values() if r.parent in frontier]
        members += children
        frontier = children
    return sorted(members, key=lambda member: runs[member].created)


def show_in_columns(figures: dict[str, go.Figure], captions: dict[str, str] | None = None) -> None:
    """Charts two by two, each keyed (so zoom survives refreshes), with its caption."""
    left, right = st.columns(2)
    for i, (key, figure) in enumerate(figures.items()):
        with left if i % 2 == 0 else right:
            st.plotly_chart(figure, key=f"chart:{key}")
            if captions and key in captions:
                st.caption(captions[key])


def show_error(run: RunStatus) -> None:
    """Why a run failed, wrapped: the message first, where it was raised on demand."""
    message, _, where = (run.error or "").partition("\n  ")
    st.error(f"Run {run.status}: {texts.literal(message)}", icon=":material/error:")
    if where:
        with st.expander("Where it was raised"):
            st.code("  " + where, language=None, wrap_lines=True)


def pick_runs(
    engine: EngineClient,
    key: str,
    handed_over: str,
    default: Callable[[list[RunStatus]], list[str]],
) -> tuple[dict[str, RunStatus], list[str]]:
    """Every run by id, and the ones picked in a multiselect stored under `key`.

    The pick lives in the URL too (`?runs=ID,ID`), so a page can be shared and survives a
    reload. Runs handed over by another page (session state `handed_over`) replace it;
    else the URL's; the first time, `default(runs)` picks; runs that no longer exist drop
    out.
    """
    runs = {run.id: run for run in engine.list()}
    if handed_over in st.session_state:
        st.session_state[key] = st.session_state.pop(handed_over)
    elif key not in st.session_state and st.query_params.get(RUNS_PARAM):
        st.session_state[key] = st.query_params[RUNS_PARAM].split(",")
    st.session_state.setdefault(key, default(list(runs.values())))
    st.session_state[key] = [run_id for run_id in st.session_state[key] if run_id in runs]
    picked = st.multiselect(
        "Runs", list(runs), key=key, format_func=lambda run_id: texts.label(runs[run_id])
    )
    if picked:
        st.query_params[RUNS_PARAM] = ",".join(picked)
    else:
        st.query_params.pop(RUNS_PARAM, None)
    return runs, picked
