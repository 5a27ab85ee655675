"""Home: what the lab is, every run, and a one-click demo race.

It imports nothing heavy: the runs come from the store, and the runs themselves train in
the engine process (see `core.engine.server`), so the page paints before TensorFlow loads.
"""

from __future__ import annotations

import streamlit as st

from core.demo_race import DEFAULT_LENGTH, LENGTHS, RUNNERS, SHOWS, race_configs
from core.escaping import escape_markdown
from core.knobs import InvalidInput
from core.store import ACTIVE_STATUSES, FINAL_STATUSES
from ui import downloads, nav, roles, runs_table, state, texts

RACE_REPEATS = "home:race_repeats"
RACE_LENGTH = "home:race_length"

st.title(":material/science: Optimizer Lab")
st.markdown(
    "Build custom TensorFlow optimizers and watch them while they train: per-layer step "
    "norms, the gradient's global norm, sparsity, loss and accuracy, live in the browser. "
    "Every optimizer here is a plain Keras 3 optimizer, with knobs you can turn mid-run."
)
engine = state.engine()
roles.share_panel()
# Two columns: at a projector's 1024 px, three cut the race's lengths and the links short.
race, links = st.columns(2)


def race_controls() -> None:
    """The demo race's button, length and seeds: the presenter's."""
    if st.button(
        "Start the demo race",
        icon=":material/sports_score:",
        type="primary",
        width="stretch",
        help="LeNet on mnist-5k, same seed and initial weights, trained side by side by "
        + "; ".join(f"{name} ({SHOWS[name]})" for name in RUNNERS)
        + ".",
    ):
        length = st.session_state.get(RACE_LENGTH) or DEFAULT_LENGTH  # a click unpicks
        repeats = int(st.session_state.get(RACE_REPEATS, 1))
        try:
            race_ids = engine.start_all(race_configs(length, repeats))
        except InvalidInput as exc:  # the engine's refusal: a model that cannot fit
            st.error(f"Not started: {escape_markdown(str(exc))}", icon=":material/warning:")
        else:
            state.open_page(nav.LIVE.file, **{state.WATCH: race_ids})
    st.segmented_control(
        "length",
        [known.label for known in LENGTHS],
        default=DEFAULT_LENGTH,
        key=RACE_LENGTH,
        help="Set in epochs, the same on every machine: "
        + ", ".join(f"{known.label}: {known.epochs} epochs" for known in LENGTHS)
        + " (the times as measured on a 2-core machine, three runs at once).",
    )
    st.number_input(
        "seeds per optimizer",
        min_value=1,
        max_value=10,
        value=1,
        key=RACE_REPEATS,
        help="Race each optimizer over this many seeds (repeats), to see how much of the "
        "gap between them is luck: Live's Groups view draws each as its mean and 95% band.",
    )


with race:
    if roles.presents():
        race_controls()
with links:
    # The quickest demo: no training, paths drawn as the knobs move.
    st.page_link(
        nav.PLAYGROUND.file,
        label="Play on a 2-D surface",
        icon=nav.PLAYGROUND.icon,
        help="The lab's optimizers racing on Rosenbrock, Beale, a saddle…: each path "
        "drawn as you move its knobs, no run to wait for.",
    )
    if roles.presents():
        st.page_link(nav.TRAIN.file, label="Configure a run", icon=nav.TRAIN.icon)
    st.page_link(
        nav.RECIPES.file,
        label="Reproduce a classic finding",
        icon=nav.RECIPES.icon,
        help="Edge of stability, large batches, decoupled weight decay and more: one click "
        "each, with a verdict from the lab's own measurements.",
    )
    st.page_link(nav.OPTIMIZERS.file, label="Browse the optimizers", icon=nav.OPTIMIZERS.icon)


@st.fragment(run_every=5 if engine.cluster_info() is not None else None)
def cluster_field() -> None:
    """Where the runs train, when the engine trains on a Ray cluster."""
    cluster = engine.cluster_info()
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


runs = engine.list()
any_active = any(run.active for run in runs)


@st.fragment(run_every=state.refresh_interval(any_active))
def every_run(was_active: bool) -> None:
    runs = engine.list()
    st.subheader(f"Runs ({len(runs)})")
    if not runs:
        st.info(
            "No runs yet. Start the demo race, or configure one on Train."
            if roles.presents()
            else "No runs yet: the presenter's show here as they start.",
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
    shown = [run for run in runs if runs_table.matches(run, text, picked)]
    interrupted = runs_table.resumable(engine, [run for run in runs if run.status == "interrupted"])
    if interrupted and roles.presents():
        st.button(
            f"Resume all interrupted ({len(interrupted)})",
            icon=":material/restart_alt:",
            on_click=runs_table.resume_runs,
            args=(engine, interrupted),
            help="Continue every run a crash or a shutdown interrupted, from its last "
            "checkpoint, oldest first.",
        )
    table = runs_table.rows(engine, shown)
    selection = st.dataframe(
        table,
        hide_index=True,
        placeholder=texts.NONE,
        key="runs_table",
        on_select="rerun",
        selection_mode="multi-row",
        column_config=runs_table.COLUMNS,
    )
    downloads.csv_download(table, "optlab-runs.csv", key="runs_table:csv")
    runs_table.actions(engine, [shown[i] for i in selection.selection.rows if i < len(shown)])
    if was_active and not any(run.active for run in runs):
        st.rerun()  # everything ended: a full rerun turns the refresh timer off


every_run(any_active)
