"""The Sweep page's tables and texts: every study with its counts, the trials of the one
picked with their runs, and a sweep's progress and plan in a line each."""

from __future__ import annotations

import streamlit as st

from core.sweep import Sweep, SweepPlan, SweepStatus, SweepSummary, TrialRow, numeric
from ui import downloads, texts
from ui.sweep_form import STARTED

TRIAL_COLUMNS = {
    "trial": st.column_config.NumberColumn("trial", format="%d", pinned=True),
    "value": st.column_config.NumberColumn(
        "value",
        format="%.3f",
        help="The trial's score by the sweep's objective: the run's best validation "
        "accuracy, lowest validation loss or MAE, or steps to the target (a pruned trial's "
        "last one).",
    ),
    "step": st.column_config.NumberColumn("step", format="%d"),
}
STUDY_COLUMNS = {
    "sweep": st.column_config.TextColumn("sweep", pinned=True),
    "of": st.column_config.NumberColumn("of", format="%d", help="The sweep's budget."),
    "best": st.column_config.NumberColumn("best", format="%.3f"),
    "started": st.column_config.DatetimeColumn("started", format="YYYY-MM-DD HH:mm"),
}
# Learning rates, radii, batch sizes: four significant digits, 1e-05 rather than 0.00001.
SETTING = st.column_config.NumberColumn(format="%.4g")


def studies_table(studies: list[SweepSummary]) -> str:
    """Every study with its trials so far; returns the one picked in the table, else the
    one this session started last, else the newest."""
    started = st.session_state.get(STARTED)
    event = st.dataframe(
        [
            {
                "sweep": s.study_name,
                "sampler": s.sampler,
                "done": s.finished,
                "of": s.n_trials,
                "training": s.running,
                "pruned": s.pruned,
                "failed": s.failed,
                "best": s.best_value,
                "started": s.started,
            }
            for s in studies
        ],
        hide_index=True,
        placeholder=texts.NONE,
        key=f"sweep:studies:{started}",  # a new table, without a pick, per sweep started
        on_select="rerun",
        selection_mode="single-row",
        column_config=STUDY_COLUMNS,
    )
    names = [s.study_name for s in studies]
    picked = event.selection.rows
    if picked and picked[0] < len(names):
        return names[picked[0]]
    return started if started in names else names[-1]


def progress_text(status: SweepStatus) -> str:
    return (
        f"{status.state} · {status.finished}/{status.n_trials} trials done "
        f"({status.pruned} pruned, {status.failed} failed) · {status.running} training · "
        f"best {texts.number(status.best_value)}"
    )


def plan_text(plan: SweepPlan) -> str:
    """How the sweep samples, with its seed, which replays it; and what a trial's value
    is (the best over the run's validations, not the last)."""
    pruning = "pruning" if plan.pruning else "no pruning"
    seeds = f" · {plan.repeats} seeds a trial" if plan.repeats > 1 else ""  # their mean: below
    return (
        f"{plan.sampler} search · seed {plan.seed} · {plan.parallel} at once · {pruning}"
        f"{seeds} · every trial: {plan.base_config.label} · a trial's value: "
        f"{plan.objective.value_text(plan.repeats)}"
    )


def trials_table(sweep: Sweep, rows: list[TrialRow]) -> TrialRow | None:
    """Every trial, with its run; returns the one picked in the table."""
    params = [row.params for row in rows]
    table = [
        {
            "trial": r.number,
            "state": r.state,
            "value": r.value,
            "± (95%)": r.spread,
            **r.params,
            "run": r.run_id,
            "run status": r.run_status,
            "step": r.step,
            "reason": r.reason,
        }
        for r in rows
    ]
    event = st.dataframe(
        table,
        hide_index=True,
        placeholder=texts.NONE,
        key=f"sweep:trials:{sweep.study_name}",  # a pick belongs to its sweep
        on_select="rerun",
        selection_mode="single-row",
        column_config=TRIAL_COLUMNS
        | {a.name: SETTING for a in sweep.plan.axes if numeric(params, a.name)},
    )
    downloads.csv_download(table, "optlab-sweep-trials.csv", key="sweep:trials:csv")
    picked = event.selection.rows
    return rows[picked[0]] if picked and picked[0] < len(rows) else None
