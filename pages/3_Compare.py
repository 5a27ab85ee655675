"""Compare: overlay runs on the same charts; their final metrics and the settings that
differ between them, as a table and as parallel coordinates; and two groups of repeats
compared with the uncertainty their seeds leave."""

from __future__ import annotations

from typing import Any

import streamlit as st

from core.charts import (
    INSTRUMENT_HELP,
    group_figure,
    hyperparameter_figure,
    instrument_figures,
    live_figures,
)
from core.engine import RunStatus
from core.engine.repeats import group_label, groups
from core.escaping import escape_markdown
from core.group_comparison import compare, describe, higher_is_better, time_to_target, value_at
from core.sweep import numeric, parallel_rows, settings, varying
from ui import downloads, state, texts, views

st.title(":material/compare: Compare")

SELECTION = "compare_runs"
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


def table_row(run: RunStatus, setting: dict[str, Any], columns: list[str]) -> dict[str, Any]:
    final = run.final_metrics or {}
    return {
        "run": run.name,
        "status": run.status,
        "optimizer": run.config["optimizer"],
        **{k: final.get(k) for k in METRICS},
        **{k: setting.get(k) for k in columns},
        "id": run.id,
    }


def alike(run: RunStatus, differ: list[str]) -> str:
    """What every run shares, e.g. `model mlp · dataset digits · radius 20`: the main run
    fields and the knobs that are on."""
    shown = {k: run.config[k] for k in BASICS} | run.config["hyperparameters"]
    return " · ".join(
        f"{k} {texts.number(v)}"
        for k, v in shown.items()
        if k not in differ and isinstance(v, int | float | str) and v is not False
    )


GROUP_METRICS = ("val_accuracy", "val_loss", "accuracy", "loss", "val_mae")
AT = ("the end", "a step", "time to reach")


def group_comparison(runs: dict[str, RunStatus]) -> None:
    """Is A better than B? Two groups of repeats, one metric at one point (or the steps
    to reach a value), compared in words, with both groups drawn as mean and band."""
    st.subheader("Is A better than B?")
    found = groups(run for run in runs.values() if run.status == "completed")
    if len(found) < 2:
        st.caption(
            "Train a config with **repeats** above 1 (on Train, or `train --repeats N`) for "
            "each of two configs: each is a group of runs over seeds, and here one group is "
            "compared with the other, with a 95% interval and p-values."
        )
        return
    labels = {group: f"{group_label(members)} ×{len(members)}" for group, members in found.items()}
    a_col, b_col, metric_col = st.columns(3)
    a = a_col.selectbox("A", list(found), format_func=labels.get, key="compare:a")
    b = b_col.selectbox("B", [g for g in found if g != a], format_func=labels.get, key="compare:b")
    metric = metric_col.selectbox("metric", GROUP_METRICS, key="compare:metric")
    at_col, where_col = st.columns(2)
    at = at_col.radio("at", AT, horizontal=True, key="compare:at")
    metrics = {g: [engine.metrics(run.id) for run in found[g]] for g in (a, b)}
    if at == "a step":
        step = int(where_col.number_input("step", min_value=1, value=100, key="compare:step"))
        values = {g: [value_at(m, metric, step) for m in metrics[g]] for g in (a, b)}
        what = f"{metric} at step {step:,}"
    elif at == "time to reach":
        target = where_col.number_input("target", value=0.9, format="%g", key="compare:target")
        better = higher_is_better(metric)
        values = {
            g: [
                time_to_target(m.steps, m[metric], target, higher_is_better=better)
                if metric in m
                else float("inf")
                for m in metrics[g]
            ]
            for g in (a, b)
        }
        what = f"steps to {metric} {'≥' if better else '≤'} {target:g}"
    else:
        values = {g: [value_at(m, metric) for m in metrics[g]] for g in (a, b)}
        what = f"final {metric}"
    try:
        result = compare(values[a], values[b])
    except ValueError as exc:
        st.warning(f"Not compared: {exc}.", icon=":material/warning:")
    else:
        percent = "accuracy" in metric and at != "time to reach"
        text = describe(result, group_label(found[a]), group_label(found[b]), what, percent=percent)
        st.markdown(escape_markdown(text))
    st.plotly_chart(
        group_figure({labels[a]: metrics[a], labels[b]: metrics[b]}, metric),
        key="chart:groups",
    )


runs, selected = views.pick_runs(
    engine,
    SELECTION,
    state.COMPARE,
    default=lambda runs: [r.id for r in runs if not r.active][:4],
)
if not selected:
    st.info(
        "Pick runs to compare (any number; finished runs are listed first on Home).",
        icon=":material/info:",
    )
    group_comparison(runs)
    st.stop()

chosen = [runs[i] for i in selected]
flat = [settings(run.config) for run in chosen]
differ = [k for k in varying(flat) if k != "optimizer"]  # the optimizer has its own column
st.dataframe(
    [table_row(run, setting, differ) for run, setting in zip(chosen, flat, strict=True)],
    hide_index=True,
    column_config={
        "run": st.column_config.TextColumn("run", pinned=True),
        **METRICS,
        **{k: SETTING for k in differ if numeric(flat, k)},
    },
)
if same := alike(chosen[0], differ):
    st.caption(f"Alike in every run: {escape_markdown(same)}")
if kept := {run.id: saved for run in chosen if (saved := engine.checkpoints(run.id))}:
    with st.popover("Download a model", icon=":material/download:"):
        model_of = st.selectbox(
            "run", list(kept), key="compare:model", format_func=lambda i: texts.label(runs[i])
        )
        downloads.model_download(engine, runs[model_of], kept[model_of])
finals = [(run.final_metrics or {}).get(TARGET) for run in chosen]
st.plotly_chart(
    hyperparameter_figure(parallel_rows(flat, TARGET, finals, keep=("optimizer",)), TARGET),
    key="chart:hyperparameters",
)

shown = [views.run_view(engine, run) for run in chosen]
views.show_in_columns(live_figures(shown))
st.subheader("Instruments")
views.show_in_columns(instrument_figures(shown), captions=INSTRUMENT_HELP)
group_comparison(runs)
