"""Compare: groups of repeats and single runs. Two groups picked are first compared with
the uncertainty their seeds leave ("Is A better than B?"); then every run is overlaid on
the same charts, with their final metrics and the settings that differ between them, as a
table and as parallel coordinates."""

from __future__ import annotations

from typing import Any

import streamlit as st

from core.charts import INSTRUMENT_HELP, hyperparameter_figure, instrument_figures, live_figures
from core.engine import RunStatus
from core.escaping import escape_markdown
from core.sweep import numeric, parallel_rows, settings, varying
from ui import compare_view, downloads, roles, state, texts, views

st.title(":material/compare: Compare")

TARGET = "val_accuracy"  # what the parallel coordinates are coloured by
METRICS = {  # the final metrics the table shows, and how
    "best_val_accuracy": st.column_config.NumberColumn("best val acc", format="%.3f"),
    "val_accuracy": st.column_config.NumberColumn("val acc", format="%.3f"),
    "best_val_mae": st.column_config.NumberColumn("best val MAE", format="%.4g"),
    "val_loss": st.column_config.NumberColumn("val loss", format="%.4g"),
    "loss": st.column_config.NumberColumn("loss", format="%.4g"),
    "steps": st.column_config.NumberColumn("steps", format="%d"),
    "steps_per_second": st.column_config.NumberColumn("steps/s", format="%.1f"),
}
# Learning rates, radii, batch sizes: four significant digits, 1e-05 rather than 0.00001.
SETTING = st.column_config.NumberColumn(format="%.4g")
BASICS = ("model", "dataset", "batch_size", "epochs", "max_steps", "seed")  # for the caption
engine = state.engine()


def table_row(
    run: RunStatus, setting: dict[str, Any], metrics: list[str], columns: list[str]
) -> dict[str, Any]:
    final = run.final_metrics or {}
    return {
        "run": run.name,
        "status": run.status,
        "optimizer": run.config["optimizer"],
        **{k: final.get(k) for k in metrics},
        **{k: setting.get(k) for k in columns},
        "id": run.id,
    }


def alike(run: RunStatus, differ: list[str]) -> str:
    """What every run shares, e.g. `model mlp · dataset digits · radius 20`: the main run
    fields and the knobs that are on."""
    flat = settings(run.config)  # a file's dataset by its own name, not the server's path
    shown = {k: flat.get(k) for k in (*BASICS, *run.config["hyperparameters"])}
    return " · ".join(
        f"{k} {texts.number(v)}"
        for k, v in shown.items()
        if k not in differ and isinstance(v, int | float | str) and v is not False
    )


picks = compare_view.pick(engine, state.COMPARE)
if len(picks.groups) >= 2:  # the question a researcher came with, before the details
    compare_view.verdict(engine, picks.groups)
if not (chosen := picks.chosen):
    st.info(
        "Pick groups of repeats or runs to compare (any number; finished runs are listed "
        "first on Home).",
        icon=":material/info:",
    )
    compare_view.how_to_compare_groups(picks)
    st.stop()

runs = picks.runs
flat = [settings(run.config) for run in chosen]
differ = [k for k in varying(flat) if k != "optimizer"]  # the optimizer has its own column
# A metric no run shown has (MAE for classifiers, accuracy for regressions) has no column.
finals = [run.final_metrics or {} for run in chosen]
metrics = [k for k in METRICS if any(final.get(k) is not None for final in finals)]
table = [
    table_row(run, setting, metrics, differ) for run, setting in zip(chosen, flat, strict=True)
]
st.dataframe(
    table,
    hide_index=True,
    placeholder=texts.NONE,
    column_config={
        "run": st.column_config.TextColumn("run", pinned=True),
        **{k: METRICS[k] for k in metrics},
        **{k: SETTING for k in differ if numeric(flat, k)},
    },
)
downloads.csv_download(table, "optlab-compare.csv", key="compare:csv")
if same := alike(chosen[0], differ):
    st.caption(f"Alike in every run: {escape_markdown(same)}")
# A download writes the model on the server's disk first: the presenter's (`ui.roles`).
kept = {run.id: saved for run in chosen if (saved := engine.checkpoints(run.id))}
if kept and roles.presents():
    with st.popover("Download a model", icon=":material/download:"):
        model_of = st.selectbox(
            "run", list(kept), key="compare:model", format_func=lambda i: texts.label(runs[i])
        )
        downloads.model_download(engine, runs[model_of], kept[model_of])
targets = [final.get(TARGET) for final in finals]
st.plotly_chart(
    hyperparameter_figure(parallel_rows(flat, TARGET, targets, keep=("optimizer",)), TARGET),
    key="chart:hyperparameters",
)

shown = [views.run_view(engine, run) for run in chosen]
views.show_in_columns(live_figures(shown))
st.subheader("Instruments")
views.show_in_columns(instrument_figures(shown), captions=INSTRUMENT_HELP)
if len(picks.groups) < 2:
    compare_view.how_to_compare_groups(picks)
