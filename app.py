"""Optimizer Lab: the home page. What the lab is, every run, and a one-click demo race.

It imports nothing heavy: the runs table comes from the SQLite store, so the first page
paints before TensorFlow has loaded (starting the demo race loads it).
"""

from __future__ import annotations

import datetime as dt

import streamlit as st

from ui import format, nav, state

st.set_page_config(page_title="Optimizer Lab", page_icon="🧪", layout="wide")
nav.sidebar()

DEMO_OPTIMIZERS = ("sgd", "adamw", "projected_gd")
DEMO_RUN = {"model": "lenet", "dataset": "mnist-5k", "epochs": 3, "seed": 0, "log_every": 1}
DEMO_KNOBS = {
    "sgd": {"learning_rate": 0.05},
    "adamw": {"learning_rate": 0.001},
    "projected_gd": {"learning_rate": 0.05, "radius": 12.0},
}

st.title("🧪 Optimizer Lab")
st.markdown(
    "Build custom TensorFlow optimizers and watch them while they train: per-layer step "
    "norms, the gradient's global norm, sparsity, loss and accuracy, live in the browser. "
    "Every optimizer here is a plain Keras 3 optimizer, with knobs you can turn mid-run."
)
engine = state.engine()


def start_demo_race() -> list[str]:
    """The same model, data, seed and initial weights, trained by three optimizers."""
    return [
        engine.start(
            {
                **DEMO_RUN,
                "optimizer": name,
                "hyperparameters": DEMO_KNOBS[name],
                "name": f"demo race · {name}",
            }
        )
        for name in DEMO_OPTIMIZERS
    ]


race, train, optimizers_page = st.columns(3)
with race:
    if st.button(
        "🏁 Start the demo race",
        type="primary",
        width="stretch",
        help="LeNet on mnist-5k, same seed and initial weights, trained by "
        + ", ".join(DEMO_OPTIMIZERS)
        + " side by side.",
    ):
        state.open_page("pages/2_Live.py", **{state.WATCH: start_demo_race()})
with train:
    st.page_link("pages/1_Train.py", label="Configure a run", icon="🚀")
with optimizers_page:
    st.page_link("pages/5_Optimizers.py", label="Browse the optimizers", icon="📐")

runs = engine.list()
any_active = any(run.active for run in runs)


@st.fragment(run_every=state.refresh_interval(any_active))
def runs_table(was_active: bool) -> None:
    runs = engine.list()
    st.subheader(f"Runs ({len(runs)})")
    if not runs:
        st.info("No runs yet. Start the demo race, or configure one on Train.")
        return
    rows = [
        {
            "id": run.id,
            "name": run.name,
            "status": format.badge(run.status),
            "optimizer": run.config.get("optimizer"),
            "knobs": format.knobs(run),
            "progress": run.progress,
            "best val acc": (run.final_metrics or {}).get("best_val_accuracy"),
            "created": dt.datetime.fromtimestamp(run.created),
        }
        for run in runs
    ]
    selection = st.dataframe(
        rows,
        hide_index=True,
        key="runs_table",
        on_select="rerun",
        selection_mode="multi-row",
        column_config={
            "progress": st.column_config.ProgressColumn("progress", min_value=0, max_value=1),
            "best val acc": st.column_config.NumberColumn(format="%.3f"),
            "created": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm:ss"),
        },
    )
    chosen = [runs[i].id for i in selection.selection.rows]
    watch, compare, clone = st.columns(3)
    if watch.button("📈 Watch live", disabled=not chosen, width="stretch"):
        state.open_page("pages/2_Live.py", **{state.WATCH: chosen})
    if compare.button("📊 Compare", disabled=len(chosen) < 1, width="stretch"):
        state.open_page("pages/3_Compare.py", **{state.COMPARE: chosen})
    if clone.button("⧉ Clone into Train", disabled=len(chosen) != 1, width="stretch"):
        config = next(run.config for run in runs if run.id == chosen[0])
        state.open_page("pages/1_Train.py", **{state.PREFILL: config})
    if was_active and not any(run.active for run in runs):
        st.rerun()  # everything ended: a full rerun turns the refresh timer off


runs_table(any_active)
