"""Runs as charts and panels: what the Live and Compare pages draw, and how they lay it out."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping

import plotly.graph_objects as go
import streamlit as st

from core.charts import RunView, group_figure
from core.engine import RunStatus
from core.engine.api import Runs
from core.engine.repeats import group_label, groups
from core.escaping import escape_markdown
from core.store import Metrics, UnknownRunError, summaries
from ui import address, state, texts
from ui.live_chart import live_chart

GROUP_KEYS = ("loss", "val_accuracy")  # the metrics a group of repeats is drawn by


def run_view(
    engine: Runs, run: RunStatus, start: int | None = None, end: int | None = None
) -> RunView:
    """A run's metrics from step `start` to `end` (all by default) and its events, ready
    for `core.charts`; a fork's with its history. The metrics are read at a resolution
    that keeps a refresh as cheap at step ten million as at step ten thousand."""
    return RunView(
        run.id,
        run.name,
        engine.overview(run.id, start=start, end=end),
        engine.events(run.id),
        batch_size=run.config.get("batch_size"),
        history=history(engine, run, start, end),
        checkpoints=[checkpoint.step for checkpoint in engine.checkpoints(run.id)],
        colour=state.colours().colour(run.id),
    )


def history(
    engine: Runs, run: RunStatus, start: int | None = None, end: int | None = None
) -> Metrics | None:
    """What a fork's ancestors logged up to where it branched off (from step `start` to
    `end` of that), oldest first; None for a run that is not a fork (or whose parent was
    deleted)."""
    if run.parent is None or run.forked_at is None:
        return None
    try:
        parent = engine.status(run.parent)
    except UnknownRunError:
        return None
    until = run.forked_at if end is None else min(end, run.forked_at)
    mine = engine.overview(parent.id, start=start, end=until)
    earlier = history(engine, parent, start, end)
    return mine if earlier is None else earlier.concat(mine)


def group_figures(
    engine: Runs,
    listed: Mapping[str, RunStatus],
    shown: list[RunView],
    start: int | None,
    end: int | None,
) -> dict[str, go.Figure]:
    """Each group of repeats among the runs shown, as its mean and 95% band (of the runs'
    means over each bucket of steps, for a long run: see `step_range`)."""
    metrics = {
        view.run_id: engine.overview(view.run_id, start=start, end=end, means=True)
        for view in shown
    }
    found = groups(listed[view.run_id] for view in shown)
    series = {
        f"{group_label(members)} ×{len(members)}": [metrics[run.id] for run in members]
        for members in found.values()
    }
    return {f"groups/{key}": group_figure(series, key) for key in GROUP_KEYS}


def step_range(key: str) -> tuple[int | None, int | None]:
    """The steps to draw, as picked in a "Steps" popover (None: from the first, to the
    last). Number fields, not a slider: a slider whose end grows with the run would be
    reset at every refresh."""
    with st.popover("Steps", icon=":material/zoom_in:"):
        st.caption(
            f"Draw these steps only. A range of up to {summaries.RAW_ROWS:,} logged steps "
            "is drawn at full resolution; a longer one from the run's summaries, each pair "
            "of points a bucket of steps' lowest and highest value, so spikes show."
        )
        first, last = st.columns(2)
        start = first.number_input(
            "From step", min_value=0, value=None, step=1, placeholder="the first", key=f"{key}:from"
        )
        end = last.number_input(
            "To step", min_value=0, value=None, step=1, placeholder="the last", key=f"{key}:to"
        )
    return start, end


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


def show_in_columns(
    figures: Mapping[str, go.Figure | str],
    captions: dict[str, str] | None = None,
    *,
    live: bool = False,
    per_row: int = 2,
) -> None:
    """Charts `per_row` a row, each keyed (so zoom survives refreshes), with its caption;
    `live` ones redraw in place (see `ui.live_chart`), and may come `drawn` already. The
    charts of one name drawn once per run (`<chart>/<run id>`) start a row: a row then
    compares the runs on one metric, never a run's metric with another's."""
    # Columns for each such group, not a row of columns for each `per_row` charts: a
    # refresh sends every block to every session watching, and the charts are of one height.
    for group in chart_groups(list(figures)):
        columns = st.columns(per_row)
        for i, key in enumerate(group):
            with columns[i % per_row]:
                if live:
                    live_chart(figures[key], key=f"chart:{key}")
                else:
                    st.plotly_chart(figures[key], key=f"chart:{key}")
                if captions and key in captions:
                    st.caption(captions[key])


def chart_groups(keys: list[str]) -> list[list[str]]:
    """`keys` in order, cut where the name before a `/` changes (`step_norm/a`,
    `step_norm/b` | `update_ratio/a` …); keys without one go together."""
    return [list(group) for _, group in itertools.groupby(keys, key=_chart_name)]


def _chart_name(key: str) -> str:
    return key.partition("/")[0] if "/" in key else ""


def show_error(run: RunStatus) -> None:
    """Why a run failed, wrapped: the message first, where it was raised on demand."""
    message, _, where = (run.error or "").partition("\n  ")
    st.error(f"Run {run.status}: {escape_markdown(message)}", icon=":material/error:")
    if where:
        with st.expander("Where it was raised"):
            st.code("  " + where, language=None, wrap_lines=True)


def pick_runs(
    engine: Runs,
    key: str,
    handed_over: str,
    default: Callable[[list[RunStatus]], list[str]],
) -> tuple[dict[str, RunStatus], list[str]]:
    """Every run by id, and the ones picked in a multiselect stored under `key`.

    The pick lives in the URL too (`?runs=ID,ID`, cleaned by `ui.address`), so a page can
    be shared and survives a reload. Runs handed over by another page (session state
    `handed_over`) replace it; else the URL's; the first time, `default(runs)` picks; runs
    that no longer exist drop out, and a run handed over twice is picked once.
    """
    runs = {run.id: run for run in engine.list()}
    if handed_over in st.session_state:
        st.session_state[key] = st.session_state.pop(handed_over)
    elif key not in st.session_state and st.query_params.get(address.RUNS):
        st.session_state[key] = st.query_params[address.RUNS].split(",")
    st.session_state.setdefault(key, default(list(runs.values())))
    kept = dict.fromkeys(st.session_state[key])  # a multiselect takes an option once
    st.session_state[key] = [run_id for run_id in kept if run_id in runs]
    picked = st.multiselect(
        "Runs", list(runs), key=key, format_func=lambda run_id: texts.label(runs[run_id])
    )
    if picked:
        st.query_params[address.RUNS] = ",".join(picked)
    else:
        st.query_params.pop(address.RUNS, None)
    return runs, picked
