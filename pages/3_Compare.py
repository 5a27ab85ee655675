"""Compare: overlay runs on the same charts; their final metrics and hyperparameters."""

from __future__ import annotations

import streamlit as st

from core.charts import INSTRUMENT_HELP, hyperparameter_figure, instrument_figures, live_figures
from core.engine import RunStatus
from ui import format, nav, state, views

st.set_page_config(page_title="Compare · Optimizer Lab", page_icon="📊", layout="wide")
nav.sidebar()
st.title("📊 Compare")

SELECTION = "compare_runs"
FINAL = ("best_val_accuracy", "val_accuracy", "val_loss", "loss", "steps", "steps_per_second")
engine = state.engine()


def table_row(run: RunStatus) -> dict[str, object]:
    hyperparameters = {
        k: v
        for k, v in run.config["hyperparameters"].items()
        if v is not None and k != "layer_rules"
    }
    final = run.final_metrics or {}
    return {
        "run": format.label(run),
        "status": format.badge(run.status),
        "optimizer": run.config["optimizer"],
        "model": run.config["model"],
        "dataset": run.config["dataset"],
        "batch_size": run.config["batch_size"],
        **{k: final.get(k) for k in FINAL},
        **hyperparameters,
    }


def numeric_row(run: RunStatus) -> dict[str, float]:
    """Numeric hyperparameters and the final validation accuracy, for parallel axes."""
    values = {
        k: float(v)
        for k, v in run.config["hyperparameters"].items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
    values["batch_size"] = float(run.config["batch_size"])
    values["val_accuracy"] = float((run.final_metrics or {}).get("val_accuracy", float("nan")))
    return values


runs, selected = views.pick_runs(
    engine,
    SELECTION,
    state.COMPARE,
    default=lambda runs: [r.id for r in runs if not r.active][:4],
)
if not selected:
    st.info("Pick runs to compare (any number; finished runs are listed first on Home).")
    st.stop()

chosen = [runs[i] for i in selected]
st.dataframe([table_row(run) for run in chosen], hide_index=True)
st.plotly_chart(
    hyperparameter_figure([numeric_row(r) for r in chosen], "val_accuracy"),
    key="chart:hyperparameters",
)

shown = [views.run_view(engine, run) for run in chosen]
views.show_in_columns(live_figures(shown))
st.subheader("Instruments")
views.show_in_columns(instrument_figures(shown), captions=INSTRUMENT_HELP)
