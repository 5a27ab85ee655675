"""Home's table of every run: its filters, its rows, and what can be done with the runs
picked in it (watch, compare, clone, resume, tag, delete)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import streamlit as st

from core.engine import RunStatus
from core.engine.api import Runs
from core.engine.client import EngineUnavailable
from core.escaping import escape_markdown
from core.knobs import InvalidInput
from core.store import UnknownRunError
from ui import nav, roles, state, texts

COLUMNS = {
    "name": st.column_config.TextColumn("name", pinned=True),
    "tags": st.column_config.ListColumn("tags"),
    "progress": st.column_config.ProgressColumn("progress", min_value=0, max_value=1),
    "best val acc": st.column_config.NumberColumn(format="%.3f"),
    "best val MAE": st.column_config.NumberColumn(format="%.4g"),
    "checkpoints MB": st.column_config.NumberColumn(format="%.1f"),
    "created": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm:ss"),
}


def matches(run: RunStatus, text: str, statuses: list[str]) -> bool:
    """Whether the run passes the filters: `text` found in its name, id, optimizer, model,
    dataset or a tag (case-insensitive), and its status among `statuses` (if any)."""
    if statuses and run.status not in statuses:
        return False
    fields = (
        run.name,
        run.id,
        *(str(run.config.get(k)) for k in ("optimizer", "model", "dataset")),
    )
    return text.lower() in " ".join((*fields, *run.tags)).lower()


def rows(engine: Runs, shown: list[RunStatus]) -> list[dict[str, Any]]:
    """The table's row of each run shown: a node column on a Ray cluster, a best MAE
    column when a regression is among them."""
    regressions = any("best_val_mae" in (run.final_metrics or {}) for run in shown)
    on_cluster = engine.cluster_info() is not None
    # What a room reads first, first: at 1024 px the table shows about five columns.
    return [
        {
            "name": run.name,
            "status": run.status,
            "best val acc": (run.final_metrics or {}).get("best_val_accuracy"),
            **(
                {"best val MAE": (run.final_metrics or {}).get("best_val_mae")}
                if regressions
                else {}
            ),
            "progress": run.progress,
            "optimizer": run.config.get("optimizer"),
            "knobs": texts.knobs(run),
            "tags": list(run.tags),
            **({"node": run.node} if on_cluster else {}),
            "checkpoints MB": engine.disk_bytes(run.id) / 1e6,
            "created": dt.datetime.fromtimestamp(run.created),
            "id": run.id,
        }
        for run in shown
    ]


def tag_runs(engine: Runs, chosen: list[RunStatus], text: str) -> None:
    tags = [tag.strip() for tag in text.split(",")]
    try:
        for run in chosen:
            engine.set_tags(run.id, [*run.tags, *tags])
    except InvalidInput as exc:
        st.toast(f"Not tagged: {escape_markdown(str(exc))}", icon=":material/warning:")


def resume_runs(engine: Runs, chosen: list[RunStatus]) -> None:
    """Continues each run from its last checkpoint, oldest first."""
    for run in sorted(chosen, key=lambda run: run.created):
        try:
            engine.resume(run.id)
        except (InvalidInput, UnknownRunError, EngineUnavailable) as exc:
            st.toast(f"Not resumed: {escape_markdown(str(exc))}", icon=":material/warning:")


def resumable(engine: Runs, runs: list[RunStatus]) -> list[RunStatus]:
    """The runs that can continue: stopped or interrupted, with a checkpoint."""
    return [run for run in runs if run.resumable and engine.checkpoints(run.id)]


def delete_runs(engine: Runs, chosen: list[RunStatus]) -> None:
    for run in chosen:
        try:
            engine.delete(run.id)
        except InvalidInput as exc:
            st.toast(f"Not deleted: {escape_markdown(str(exc))}", icon=":material/warning:")
    st.session_state.pop("runs_table", None)  # its selection named rows that are gone


def actions(engine: Runs, chosen: list[RunStatus]) -> None:
    """What can be done with the runs picked in the table: watch and compare them, and
    for the presenter (`ui.roles`) clone, resume, tag and delete them."""
    ids = [run.id for run in chosen]
    # A row that wraps: six buttons in six columns were cut to "W…", "Co…" at 1024 px.
    row = st.container(horizontal=True)
    if row.button("Watch live", icon=":material/monitoring:", disabled=not ids, width="content"):
        state.open_page(nav.LIVE.file, **{state.WATCH: ids})
    if row.button("Compare", icon=":material/compare:", disabled=not ids, width="content"):
        state.open_page(nav.COMPARE.file, **{state.COMPARE: ids})
    if not roles.presents():
        return
    if row.button(
        "Clone into Train",
        icon=":material/content_copy:",
        disabled=len(ids) != 1,
        width="content",
    ):
        state.open_page(nav.TRAIN.file, **{state.PREFILL: chosen[0].config})
    can_resume = resumable(engine, chosen)
    row.button(
        "Resume",
        icon=":material/play_arrow:",
        disabled=not can_resume,
        width="content",
        on_click=resume_runs,
        args=(engine, can_resume),
        help="Continue the stopped or interrupted runs picked from their last checkpoints.",
    )
    with row.popover("Tag", icon=":material/sell:", disabled=not ids, width="content"):
        text = st.text_input("Tags to add, separated by commas", key="new_tags")
        st.button(
            "Add tags", on_click=tag_runs, args=(engine, chosen, text), disabled=not text.strip()
        )
    ended = [run for run in chosen if not run.active or not run.steerable]
    with row.popover("Delete", icon=":material/delete:", disabled=not ended, width="content"):
        st.write(
            f"Delete {len(ended)} ended run(s) with their metrics and events? "
            "This cannot be undone."
            + (" Runs still training are left alone." if len(ended) < len(chosen) else "")
        )
        st.button("Delete", type="primary", on_click=delete_runs, args=(engine, ended))
