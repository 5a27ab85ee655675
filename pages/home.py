"""Home: what the lab is, every run, and a one-click demo race.

It imports nothing heavy: the runs come from the store, and the runs themselves train in
the engine process (see `core.engine.server`), so the page paints before TensorFlow loads.
"""

from __future__ import annotations

import datetime as dt

import streamlit as st

from core.engine import RunConfig, RunStatus
from core.engine.client import EngineUnavailable
from core.engine.repeats import repeat_configs
from core.escaping import escape_markdown
from core.knobs import InvalidInput
from core.store import ACTIVE_STATUSES, FINAL_STATUSES, UnknownRunError
from ui import state, texts

DEMO_OPTIMIZERS = ("sgd", "adamw", "projected_gd")
RACE_REPEATS = "home:race_repeats"
DEMO_RUN = {"model": "lenet", "dataset": "mnist-5k", "epochs": 3, "seed": 0, "log_every": 1}
DEMO_KNOBS = {
    "sgd": {"learning_rate": 0.05},
    "adamw": {"learning_rate": 0.001},
    "projected_gd": {"learning_rate": 0.05, "radius": 12.0},
}

st.title(":material/science: Optimizer Lab")
st.markdown(
    "Build custom TensorFlow optimizers and watch them while they train: per-layer step "
    "norms, the gradient's global norm, sparsity, loss and accuracy, live in the browser. "
    "Every optimizer here is a plain Keras 3 optimizer, with knobs you can turn mid-run."
)
engine = state.engine()


def start_demo_race(repeats: int) -> list[str]:
    """The same model, data, seed and initial weights, trained by three optimizers; with
    `repeats` above 1, each over that many seeds, as a group."""
    configs = [
        RunConfig.from_dict(
            {
                **DEMO_RUN,
                "optimizer": name,
                "hyperparameters": DEMO_KNOBS[name],
                "name": f"demo race · {name}",
            }
        )
        for name in DEMO_OPTIMIZERS
    ]
    return engine.start_all(copy for config in configs for copy in repeat_configs(config, repeats))


race, train, optimizers_page = st.columns(3)
with race:
    if st.button(
        "Start the demo race",
        icon=":material/sports_score:",
        type="primary",
        width="stretch",
        help="LeNet on mnist-5k, same seed and initial weights, trained by "
        + ", ".join(DEMO_OPTIMIZERS)
        + " side by side.",
    ):
        repeats = int(st.session_state.get(RACE_REPEATS, 1))
        try:
            race_ids = start_demo_race(repeats)
        except InvalidInput as exc:  # the engine's refusal: a model that cannot fit
            st.error(f"Not started: {escape_markdown(str(exc))}", icon=":material/warning:")
        else:
            state.open_page("pages/2_Live.py", **{state.WATCH: race_ids})
    st.number_input(
        "seeds per optimizer",
        min_value=1,
        max_value=10,
        value=1,
        key=RACE_REPEATS,
        help="Race each optimizer over this many seeds (repeats), to see how much of the "
        "gap between them is luck: Live's Groups view draws each as its mean and 95% band.",
    )
with train:
    st.page_link("pages/1_Train.py", label="Configure a run", icon=":material/rocket_launch:")
with optimizers_page:
    st.page_link("pages/5_Optimizers.py", label="Browse the optimizers", icon=":material/function:")


@st.fragment(run_every=5 if engine.cluster() is not None else None)
def cluster_field() -> None:
    """Where the runs train, when the engine trains on a Ray cluster."""
    cluster = engine.cluster()
    if cluster is None:
        return
    if "error" in cluster:
        st.warning(
            f"Ray cluster at {escape_markdown(cluster['address'])}: "
            f"{escape_markdown(cluster['error'])}",
            icon=":material/lan:",
        )
        return
    nodes = escape_markdown(", ".join(cluster["nodes"]))  # names its operator chose
    st.info(
        f"Runs train on the Ray cluster at {escape_markdown(cluster['address'])}: "
        f"{len(cluster['nodes'])} node(s) ({nodes}), "
        f"{cluster['free_cpus']:g} of {cluster['cpus']:g} CPUs free, "
        f"{cluster['free_gpus']:g} of {cluster['gpus']:g} GPUs free.",
        icon=":material/lan:",
    )


cluster_field()


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


def tag_runs(chosen: list[RunStatus], text: str) -> None:
    tags = [tag.strip() for tag in text.split(",")]
    try:
        for run in chosen:
            engine.set_tags(run.id, [*run.tags, *tags])
    except InvalidInput as exc:
        st.toast(f"Not tagged: {escape_markdown(str(exc))}", icon=":material/warning:")


def resume_runs(chosen: list[RunStatus]) -> None:
    """Continues each run from its last checkpoint, oldest first."""
    for run in sorted(chosen, key=lambda run: run.created):
        try:
            engine.resume(run.id)
        except (InvalidInput, UnknownRunError, EngineUnavailable) as exc:
            st.toast(f"Not resumed: {escape_markdown(str(exc))}", icon=":material/warning:")


def resumable(runs: list[RunStatus]) -> list[RunStatus]:
    """The runs that can continue: stopped or interrupted, with a checkpoint."""
    return [run for run in runs if run.resumable and engine.checkpoints(run.id)]


def delete_runs(chosen: list[RunStatus]) -> None:
    for run in chosen:
        try:
            engine.delete(run.id)
        except InvalidInput as exc:
            st.toast(f"Not deleted: {escape_markdown(str(exc))}", icon=":material/warning:")
    st.session_state.pop("runs_table", None)  # its selection named rows that are gone


def actions(chosen: list[RunStatus]) -> None:
    """What can be done with the runs picked in the table."""
    ids = [run.id for run in chosen]
    watch, compare, clone, carry_on, tag, delete = st.columns(6)
    if watch.button("Watch live", icon=":material/monitoring:", disabled=not ids, width="stretch"):
        state.open_page("pages/2_Live.py", **{state.WATCH: ids})
    if compare.button("Compare", icon=":material/compare:", disabled=not ids, width="stretch"):
        state.open_page("pages/3_Compare.py", **{state.COMPARE: ids})
    if clone.button(
        "Clone into Train",
        icon=":material/content_copy:",
        disabled=len(ids) != 1,
        width="stretch",
    ):
        state.open_page("pages/1_Train.py", **{state.PREFILL: chosen[0].config})
    can_resume = resumable(chosen)
    carry_on.button(
        "Resume",
        icon=":material/play_arrow:",
        disabled=not can_resume,
        width="stretch",
        on_click=resume_runs,
        args=(can_resume,),
        help="Continue the stopped or interrupted runs picked from their last checkpoints.",
    )
    with tag.popover("Tag", icon=":material/sell:", disabled=not ids, width="stretch"):
        text = st.text_input("Tags to add, separated by commas", key="new_tags")
        st.button("Add tags", on_click=tag_runs, args=(chosen, text), disabled=not text.strip())
    ended = [run for run in chosen if not run.active or not run.steerable]
    with delete.popover("Delete", icon=":material/delete:", disabled=not ended, width="stretch"):
        st.write(
            f"Delete {len(ended)} ended run(s) with their metrics and events? "
            "This cannot be undone."
            + (" Runs still training are left alone." if len(ended) < len(chosen) else "")
        )
        st.button("Delete", type="primary", on_click=delete_runs, args=(ended,))


runs = engine.list()
any_active = any(run.active for run in runs)


@st.fragment(run_every=state.refresh_interval(any_active))
def runs_table(was_active: bool) -> None:
    runs = engine.list()
    st.subheader(f"Runs ({len(runs)})")
    if not runs:
        st.info(
            "No runs yet. Start the demo race, or configure one on Train.",
            icon=":material/info:",
        )
        return
    search, statuses = st.columns([3, 2])
    text = search.text_input(
        "Filter", key="runs_filter", placeholder="name, id, optimizer, model, dataset or tag"
    )
    picked = statuses.multiselect(
        "Status", [*ACTIVE_STATUSES, *FINAL_STATUSES], key="runs_status_filter"
    )
    shown = [run for run in runs if matches(run, text, picked)]
    interrupted = resumable([run for run in runs if run.status == "interrupted"])
    if interrupted:
        st.button(
            f"Resume all interrupted ({len(interrupted)})",
            icon=":material/restart_alt:",
            on_click=resume_runs,
            args=(interrupted,),
            help="Continue every run a crash or a shutdown interrupted, from its last "
            "checkpoint, oldest first.",
        )
    regressions = any("best_val_mae" in (run.final_metrics or {}) for run in shown)
    on_cluster = engine.cluster() is not None
    selection = st.dataframe(
        [
            {
                "id": run.id,
                "name": run.name,
                "status": run.status,
                "optimizer": run.config.get("optimizer"),
                "knobs": texts.knobs(run),
                "tags": list(run.tags),
                "progress": run.progress,
                **({"node": run.node} if on_cluster else {}),
                "best val acc": (run.final_metrics or {}).get("best_val_accuracy"),
                **(
                    {"best val MAE": (run.final_metrics or {}).get("best_val_mae")}
                    if regressions
                    else {}
                ),
                "checkpoints MB": engine.disk_bytes(run.id) / 1e6,
                "created": dt.datetime.fromtimestamp(run.created),
            }
            for run in shown
        ],
        hide_index=True,
        key="runs_table",
        on_select="rerun",
        selection_mode="multi-row",
        column_config={
            "tags": st.column_config.ListColumn("tags"),
            "progress": st.column_config.ProgressColumn("progress", min_value=0, max_value=1),
            "best val acc": st.column_config.NumberColumn(format="%.3f"),
            "best val MAE": st.column_config.NumberColumn(format="%.4g"),
            "checkpoints MB": st.column_config.NumberColumn(format="%.1f"),
            "created": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm:ss"),
        },
    )
    actions([shown[i] for i in selection.selection.rows if i < len(shown)])
    if was_active and not any(run.active for run in runs):
        st.rerun()  # everything ended: a full rerun turns the refresh timer off


runs_table(any_active)
