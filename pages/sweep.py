"""Sweep: search knobs and ranges with Optuna; every trial is a run, watched like any other."""

from __future__ import annotations

import contextlib
from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from core.charts import hyperparameter_figure
from core.escaping import escape_markdown
from core.knobs import InvalidInput
from core.redaction import redacted
from core.store import StoreError, UnknownRunError
from core.sweep import Sweep, SweepStatus, TrialRow, list_studies, parallel_rows
from ui import (
    nav,
    population_form,
    population_view,
    roles,
    state,
    sweep_actions,
    sweep_analysis_view,
    sweep_form,
    sweep_tables,
)
from ui.live_chart import live_chart

st.title(":material/explore: Sweep")
st.caption(
    "Grid or sampled search over any knob, scored by the objective picked (validation "
    "accuracy, loss, a regression's MAE, or the steps to a target); Optuna prunes trials "
    "that trail the others. Studies live in the lab's store, beside its runs; the engine "
    "process drives them, so a sweep runs on while the dashboard restarts. Populations "
    "(population-based training) show their lineage and the knob schedules they found."
)

engine = state.engine()
mode = st.segmented_control(
    "Show",
    ["Sweeps", "Populations"],
    default="Sweeps",
    key="sweep:mode",
    label_visibility="collapsed",
    help="Populations: population-based training (`optlab pbt`), its lineage and schedules.",
)


def open_sweep(name: str) -> Sweep | None:
    if name not in state.sweeps():
        try:
            state.sweeps()[name] = Sweep.load(engine, name)
        except InvalidInput as exc:
            st.warning(escape_markdown(redacted(str(exc))), icon=":material/warning:")
            return None
    return state.sweeps()[name]


def anything_active() -> bool:
    return any(sweep.active for sweep in state.sweeps().values())


def trial_config(sweep: Sweep, trial: TrialRow) -> dict[str, Any]:
    """The config the trial's run trained with; the plan's for the trial's values when the
    run is not in this store (another machine's, in a shared storage)."""
    with contextlib.suppress(UnknownRunError):
        if trial.run_id is not None:
            return engine.status(trial.run_id).config
    return sweep.plan.config_for(trial.params).to_dict()


def steering(
    sweep: Sweep,
    status: SweepStatus,
    picked: TrialRow | None,
    steer: DeltaGenerator,
    clone: DeltaGenerator,
    best: DeltaGenerator,
) -> None:
    """Resume or stop the sweep, and open a trial's config in Train: the presenter's."""
    if status.resumable:
        steer.button(
            "Resume the sweep",
            icon=":material/play_circle:",
            key="sweep:resume",
            on_click=sweep_actions.resume,
            args=(engine, sweep.study_name),
            width="stretch",
            help=f"Run its {status.to_run} trials left; those a stop or a crash cut short "
            "run their values again.",
        )
    else:
        steer.button(
            "Stop the sweep",
            icon=":material/stop_circle:",
            key="sweep:stop",
            on_click=sweep_actions.stop,
            args=(sweep,),
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
        state.open_page(nav.TRAIN.file, **{state.PREFILL: trial_config(sweep, picked)})
    if best.button(
        "Open the best in Train",
        icon=":material/trophy:",
        key="sweep:best",
        disabled=status.best_run_id is None,
        width="stretch",
    ):
        state.open_page(nav.TRAIN.file, **{state.PREFILL: sweep.best_config().to_dict()})


def actions(
    sweep: Sweep, status: SweepStatus, rows: list[TrialRow], picked: TrialRow | None
) -> None:
    steer, clone, best, watch = st.columns(4)
    if roles.presents():  # a viewer watches: the rest steer the sweep, or open Train
        steering(sweep, status, picked, steer, clone, best)
    running = [r.run_id for r in rows if r.run_id and r.state == "RUNNING"]
    shown = running or ([status.best_run_id] if status.best_run_id else [])
    if watch.button(
        "Watch its runs",
        icon=":material/monitoring:",
        key="sweep:watch",
        disabled=not shown,
        width="stretch",
    ):
        state.open_page(nav.LIVE.file, **{state.WATCH: shown})


def sweep_view(sweep: Sweep) -> None:
    status = sweep.status()
    st.progress(status.progress, text=sweep_tables.progress_text(status))
    st.caption(escape_markdown(sweep_tables.plan_text(sweep.plan)))
    if status.error:
        st.error(escape_markdown(redacted(status.error)), icon=":material/error:")
    rows = sweep.results()
    picked = sweep_tables.trials_table(sweep, rows)
    scored = [r for r in rows if r.value is not None]
    if scored:
        target = sweep.plan.objective.metric
        figure_rows = parallel_rows([r.params for r in scored], target, [r.value for r in scored])
        live_chart(hyperparameter_figure(figure_rows, target), key="chart:sweep")
    actions(sweep, status, rows, picked)
    sweep_analysis_view.analysis_view(sweep)


def sweeps_view(was_active: bool) -> None:
    """The studies and the one picked (a fragment: while any sweep runs, every study's
    counts tick along with the picked sweep's trials)."""
    try:
        # Oldest first: a new study adds a row at the end, so a pick (a row number) stays.
        studies = list_studies(engine)[::-1]
        if not studies:
            st.info("No sweeps yet.", icon=":material/info:")
            return
        if (sweep := open_sweep(sweep_tables.studies_table(studies))) is not None:
            sweep_view(sweep)
    except (InvalidInput, StoreError) as exc:  # the storage cannot be opened, or failed
        sweep_form.failed("The sweeps cannot be read", exc)
    if was_active != anything_active():
        st.rerun()  # every sweep ended, or one resumed: a full rerun sets the timer


if mode == "Populations":
    if roles.presents():  # a viewer watches the populations
        population_form.new_population_form(engine)
    # Reads the runs again after the form, which may just have started a population.
    population_view.populations_view(engine)
else:
    if roles.presents():  # a viewer browses the sweeps' results
        sweep_form.new_sweep_form(engine)
    # The timer is set after the form, which may just have started a sweep: set before it,
    # a sweep started on this page was not seen to run, and its view never ticked.
    active = anything_active()
    st.fragment(sweeps_view, run_every=state.refresh_interval(active))(active)
