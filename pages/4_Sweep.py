"""Sweep: search knobs and ranges with Optuna; every trial is a run, watched like any other."""

from __future__ import annotations

import contextlib
from typing import Any

import pandas as pd
import streamlit as st

from core import data, models, optimizers
from core.charts import hyperparameter_figure
from core.engine import RunConfig
from core.engine.repeats import MAX_REPEATS
from core.escaping import escape_markdown
from core.knobs import InvalidInput
from core.redaction import redacted
from core.store import StoreError, UnknownRunError
from core.sweep import (
    MAX_SEED,
    SAMPLERS,
    SearchSpace,
    Sweep,
    SweepPlan,
    SweepStatus,
    SweepSummary,
    TrialRow,
    list_studies,
    numeric,
    parallel_rows,
    sweepable_knobs,
)
from ui import forms, state, texts
from ui.live_chart import live_chart

st.title(":material/explore: Sweep")
st.caption(
    "Grid or sampled search over any knob, scored by the best validation accuracy (for a "
    "regression, the lowest validation MAE); Optuna prunes trials that trail the others. "
    "Studies live in the lab's store, beside its runs."
)

ERRORS = "sweep_errors"
STARTED = "sweep:started"  # the study this session started last, shown until a pick
TRIAL_COLUMNS = {
    "trial": st.column_config.NumberColumn("trial", format="%d", pinned=True),
    "value": st.column_config.NumberColumn(
        "value",
        format="%.3f",
        help="The run's best validation accuracy, or lowest validation MAE for a regression "
        "(a pruned trial's last one).",
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
engine = state.engine()


def dimension_rows(optimizer: str) -> list[dict[str, Any]]:
    knob = sweepable_knobs(optimizer)["learning_rate"]
    return [
        {
            "name": "learning_rate",
            "low": knob.default / 10,
            "high": knob.default * 10,
            "log": True,
            "points": 3,
            "choices": "",
        }
    ]


def new_sweep_form() -> None:
    with st.expander("New sweep", expanded=not state.sweeps()):
        base_col, search_col = st.columns(2)
        with base_col:
            st.markdown("**What every trial trains**")
            optimizer = st.selectbox(
                "optimizer", [spec.name for spec in optimizers.specs()], key="sweep:optimizer"
            )
            model_names = [m.name for m in models.catalog(plugins=True)]
            model = st.selectbox(
                "model", model_names, index=model_names.index("lenet"), key="sweep:model"
            )
            st.caption(texts.described("model", model))
            dataset = st.selectbox(
                "dataset", [d.name for d in data.catalog(plugins=True)], key="sweep:dataset"
            )
            st.caption(texts.described("dataset", dataset))
            epochs = st.number_input("epochs", 1, 1000, 3, key="sweep:epochs")
            val_every = st.number_input(
                "validate every (steps, 0: each epoch)", 0, 10**6, 0, key="sweep:val_every"
            )
        with search_col:
            st.markdown("**What to search**")
            names = list(sweepable_knobs(optimizer))
            frame = st.data_editor(
                pd.DataFrame(dimension_rows(optimizer)),
                num_rows="dynamic",
                hide_index=True,
                key=f"sweep:dimensions:{optimizer}",
                width="stretch",
                column_config={
                    "name": st.column_config.SelectboxColumn("knob", options=names),
                    "log": st.column_config.CheckboxColumn("log scale"),
                    "points": st.column_config.NumberColumn("grid points", min_value=1),
                    "choices": st.column_config.TextColumn("or choices (a, b, …)"),
                },
            )
            sampler = st.radio(
                "search",
                SAMPLERS,
                index=SAMPLERS.index("tpe"),
                horizontal=True,
                key="sweep:sampler",
            )
            n_trials = st.number_input(
                "trials (empty for a grid: every point)",
                1,
                10_000,
                8,
                key="sweep:n_trials",
                placeholder="every grid point",
            )
            parallel = st.number_input("trials at once", 1, 16, 2, key="sweep:parallel")
            repeats = st.number_input(
                "seeds per trial",
                1,
                MAX_REPEATS,
                1,
                key="sweep:repeats",
                help="Each trial trains its values this many times, over seeds; its value "
                "is their mean (± its 95% t-interval in the table), so the search does not "
                "chase a lucky seed, and pruning compares means.",
            )
            seed = st.number_input(
                "sampler seed (empty: a fresh random one, shown below once started)",
                0,
                MAX_SEED,
                None,
                key="sweep:seed",
                placeholder="random",
            )
            pruning = st.toggle("prune trials that trail", True, key="sweep:pruning")
        if st.button("Start sweep", type="primary", key="sweep:start"):
            try:
                base = RunConfig(
                    optimizer=optimizer,
                    model=model,
                    dataset=dataset,
                    epochs=int(epochs),
                    val_every=int(val_every) or None,
                    log_every=10,
                )
                sweep = Sweep(
                    engine,
                    base,
                    SearchSpace.from_rows(frame.to_dict("records")),
                    n_trials=None if n_trials is None else int(n_trials),
                    sampler=sampler,
                    pruning=pruning,
                    parallel=int(parallel),
                    repeats=int(repeats),
                    seed=None if seed is None else int(seed),
                )
                sweep.start()
            except InvalidInput as exc:
                st.session_state[ERRORS] = exc.errors
            except StoreError as exc:
                failed("Not started", exc)
            else:
                st.session_state.pop(ERRORS, None)
                state.sweeps()[sweep.study_name] = sweep
                st.session_state[STARTED] = sweep.study_name
        for name, reason in st.session_state.get(ERRORS, {}).items():
            forms.error(name, reason)


def failed(what: str, exc: Exception) -> None:
    """What failed and why (the storage's or the store's error), as a message rather
    than a traceback, without the secrets of a URL it quotes."""
    st.error(f"{what}: {escape_markdown(redacted(str(exc)))}", icon=":material/error:")


def open_sweep(name: str) -> Sweep | None:
    if name not in state.sweeps():
        try:
            state.sweeps()[name] = Sweep.load(engine, name)
        except InvalidInput as exc:
            st.warning(escape_markdown(redacted(str(exc))), icon=":material/warning:")
            return None
    return state.sweeps()[name]


def resume(name: str) -> None:
    """Drives the study again: a stopped `Sweep` cannot start twice, so a fresh one."""
    try:
        sweep = Sweep.load(engine, name)
        sweep.start()
    except (InvalidInput, StoreError) as exc:
        st.toast(f"Not resumed: {escape_markdown(redacted(str(exc)))}", icon=":material/warning:")
    else:
        state.sweeps()[name] = sweep


def anything_active() -> bool:
    return any(sweep.active for sweep in state.sweeps().values())


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
    """How the sweep samples; with its seed, which replays it."""
    pruning = "pruning" if plan.pruning else "no pruning"
    seeds = f" · {plan.repeats} seeds a trial, valued by their mean" if plan.repeats > 1 else ""
    return (
        f"{plan.sampler} search · seed {plan.seed} · {plan.parallel} at once · {pruning}"
        f"{seeds} · every trial: {plan.base_config.label}"
    )


def trials_table(sweep: Sweep, rows: list[TrialRow]) -> TrialRow | None:
    """Every trial, with its run; returns the one picked in the table."""
    params = [row.params for row in rows]
    event = st.dataframe(
        [
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
        ],
        hide_index=True,
        key=f"sweep:trials:{sweep.study_name}",  # a pick belongs to its sweep
        on_select="rerun",
        selection_mode="single-row",
        column_config=TRIAL_COLUMNS
        | {a.name: SETTING for a in sweep.plan.axes if numeric(params, a.name)},
    )
    picked = event.selection.rows
    return rows[picked[0]] if picked and picked[0] < len(rows) else None


def trial_config(sweep: Sweep, trial: TrialRow) -> dict[str, Any]:
    """The config the trial's run trained with; the plan's for the trial's values when the
    run is not in this store (another machine's, in a shared storage)."""
    with contextlib.suppress(UnknownRunError):
        if trial.run_id is not None:
            return engine.status(trial.run_id).config
    return sweep.plan.config_for(trial.params).to_dict()


def actions(
    sweep: Sweep, status: SweepStatus, rows: list[TrialRow], picked: TrialRow | None
) -> None:
    stop, clone, best, watch = st.columns(4)
    if status.resumable:
        stop.button(
            "Resume the sweep",
            icon=":material/play_circle:",
            key="sweep:resume",
            on_click=resume,
            args=(sweep.study_name,),
            width="stretch",
            help=f"Run its {status.to_run} trials left; those a stop or a crash cut short "
            "run their values again.",
        )
    else:
        stop.button(
            "Stop the sweep",
            icon=":material/stop_circle:",
            key="sweep:stop",
            on_click=sweep.stop,
            disabled=not status.active,
            width="stretch",
        )
    if (
        clone.button(
            "Clone into Train",
            icon=":material/content_copy:",
            key="sweep:clone",
            disabled=picked is None or picked.run_id is None,
            help="Pick a trial in the table: its run's config opens in the Train form.",
            width="stretch",
        )
        and picked is not None
    ):
        state.open_page("pages/1_Train.py", **{state.PREFILL: trial_config(sweep, picked)})
    if best.button(
        "Open the best in Train",
        icon=":material/trophy:",
        key="sweep:best",
        disabled=status.best_run_id is None,
        width="stretch",
    ):
        state.open_page("pages/1_Train.py", **{state.PREFILL: sweep.best_config().to_dict()})
    running = [r.run_id for r in rows if r.run_id and r.state == "RUNNING"]
    shown = running or ([status.best_run_id] if status.best_run_id else [])
    if watch.button(
        "Watch its runs",
        icon=":material/monitoring:",
        key="sweep:watch",
        disabled=not shown,
        width="stretch",
    ):
        state.open_page("pages/2_Live.py", **{state.WATCH: shown})


def sweep_view(sweep: Sweep) -> None:
    status = sweep.status()
    st.progress(status.progress, text=progress_text(status))
    st.caption(escape_markdown(plan_text(sweep.plan)))
    if status.error:
        st.error(escape_markdown(redacted(status.error)), icon=":material/error:")
    rows = sweep.results()
    picked = trials_table(sweep, rows)
    scored = [r for r in rows if r.value is not None]
    if scored:
        target = sweep.plan.objective.metric
        figure_rows = parallel_rows([r.params for r in scored], target, [r.value for r in scored])
        live_chart(hyperparameter_figure(figure_rows, target), key="chart:sweep")
    actions(sweep, status, rows, picked)


# One fragment for the studies and the one picked: while any sweep runs, every study's
# counts tick along with the picked sweep's trials.
@st.fragment(run_every=state.refresh_interval(anything_active()))
def sweeps_view(was_active: bool) -> None:
    try:
        # Oldest first: a new study adds a row at the end, so a pick (a row number) stays.
        studies = list_studies(engine)[::-1]
        if not studies:
            st.info("No sweeps yet.", icon=":material/info:")
            return
        if (sweep := open_sweep(studies_table(studies))) is not None:
            sweep_view(sweep)
    except (InvalidInput, StoreError) as exc:  # the storage cannot be opened, or failed
        failed("The sweeps cannot be read", exc)
    if was_active != anything_active():
        st.rerun()  # every sweep ended, or one resumed: a full rerun sets the timer


new_sweep_form()
sweeps_view(anything_active())
