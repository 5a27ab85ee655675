"""Live: watch one or more runs train, steer them, and read their charts as they grow."""

from __future__ import annotations

import time
from collections.abc import Callable

import plotly.graph_objects as go
import streamlit as st

from core.charts import (
    INSTRUMENT_HELP,
    RunView,
    group_figure,
    instrument_figures,
    layer_figures,
    training_figures,
)
from core.engine import RunConfig, RunStatus
from core.engine.client import EngineUnavailable
from core.engine.config import LR_FIND
from core.engine.live import TASK_WEIGHT, live_knobs
from core.engine.lr_find import training_config
from core.engine.repeats import group_label, groups
from core.escaping import escape_markdown
from core.knobs import InvalidInput, Knob, live_change
from core.store import Command, UnknownRunError
from ui import downloads, landscape, range_test, state, texts, views

st.title(":material/monitoring: Live")

SELECTION = "live_runs"
FIRST_POINT_WAIT = 30.0  # seconds a new run's charts are looked at every second
engine = state.engine()


def slider_values(knob: Knob, value: float) -> list[float]:
    """1-2-5 steps over four decades either side of `value`, each one a valid mid-run
    value of the knob (0 only where its range allows it), plus `value` itself."""
    candidates = {value, 0.0}
    for exponent in range(-9, 7):
        for mantissa in (1, 2, 5):
            candidates.add(float(f"{mantissa}e{exponent}"))
    span = max(abs(value), 1e-8)
    return sorted(
        v for v in candidates if (v == 0.0 or span / 1e4 <= v <= span * 1e4) and _valid(knob, v)
    )


def _valid(knob: Knob, value: float) -> bool:
    try:
        live_change([knob], knob.name, value, was_on=True)
    except ValueError:
        return False
    return True


def send(action: Callable[[str], Command], run_id: str, done: str) -> None:
    """A button's command to the run's process; a refusal is shown, not raised."""
    try:
        command = engine.settle(action(run_id))
    except (InvalidInput, UnknownRunError) as exc:
        st.toast(f"Not done: {escape_markdown(str(exc))}", icon=":material/warning:")
        return
    if command.error:
        st.toast(f"Not done: {escape_markdown(command.error)}", icon=":material/warning:")
    else:
        st.toast(done, icon=":material/check:")


def resume(run_id: str, step: int) -> None:
    """Continues an ended run from its last checkpoint, in the engine process."""
    try:
        engine.resume(run_id)
    except (InvalidInput, UnknownRunError, EngineUnavailable) as exc:
        st.toast(f"Not resumed: {escape_markdown(str(exc))}", icon=":material/warning:")
    else:
        st.toast(f"Resuming from step {step:,}", icon=":material/play_arrow:")


def on_knobs(run: RunStatus) -> list[Knob]:
    """The run's live knobs that are on (a multi-task run's task weights too); none for a
    script's Keras optimizer (`LabCallback`), which is not one of the lab's."""
    try:
        knobs = live_knobs(run.config["optimizer"], bool(run.config.get("multitask")))
    except InvalidInput:
        return []
    return [knob for knob in knobs if run.knobs.get(knob.name) is not None]


def fork_form(run: RunStatus, saved: list[int]) -> None:
    """Pick a checkpoint, change live knobs, the length or the name, and start a fork;
    then watch it beside its parent."""
    # A fork changes its optimizer's knobs; its task weights are its parent's.
    live = [knob for knob in on_knobs(run) if not knob.name.startswith(TASK_WEIGHT)]
    with st.form(key=f"fork:{run.id}", border=False):
        step = st.select_slider(
            "From its checkpoint of step", saved, value=saved[-1], key=f"fork-step:{run.id}"
        )
        chosen = {
            knob.name: st.number_input(
                knob.name,
                value=float(run.knobs[knob.name]),
                format="%g",
                key=f"fork-knob:{run.id}:{knob.name}",
                help=f"{escape_markdown(knob.help)} Left as it is: the value it had at that step.",
            )
            for knob in live
        }
        max_steps = st.number_input(
            "max_steps", min_value=1, value=run.total_steps or 1, key=f"fork-steps:{run.id}"
        )
        name = st.text_input("name", placeholder=f"{run.name} · fork@…", key=f"fork-name:{run.id}")
        if not st.form_submit_button("Start the fork", icon=":material/call_split:"):
            return
    changes: dict[str, object] = {
        knob: value for knob, value in chosen.items() if value != float(run.knobs[knob])
    }
    if max_steps != run.total_steps:
        changes["max_steps"] = int(max_steps)
    if name.strip():
        changes["name"] = name.strip()
    try:
        fork_id = engine.fork(run.id, step, **changes)
    except (InvalidInput, UnknownRunError, EngineUnavailable) as exc:
        st.error(f"Not forked: {escape_markdown(str(exc))}", icon=":material/warning:")
        return
    state.open_page("pages/2_Live.py", **{state.WATCH: [run.id, fork_id]})


def knob_form(run: RunStatus) -> None:
    """A slider per live knob that is on, set at its current value; nothing changes until
    Apply, and then only the knobs moved away from the value they showed."""
    live = on_knobs(run)
    if not live:
        st.caption("Its optimizer has no live knob the lab can change.")
        return
    with st.form(key=f"knobs:{run.id}", border=False):
        shown: dict[str, tuple[float, float]] = {}
        for column, knob in zip(st.columns(len(live)), live, strict=True):
            now = float(run.knobs[knob.name])
            with column:
                chosen = st.select_slider(
                    knob.name,
                    slider_values(knob, now),
                    value=now,
                    # A new current value (from here, another tab or the CLI) is a new
                    # slider, so a stale position can never be sent.
                    key=f"knob:{run.id}:{knob.name}:{now!r}",
                    format_func=texts.number,
                    help=escape_markdown(knob.help),
                )
            shown[knob.name] = (now, chosen)
        if st.form_submit_button("Apply", icon=":material/tune:", key=f"apply:{run.id}"):
            changes = {name: value for name, (now, value) in shown.items() if value != now}
            if not changes:
                st.toast("Nothing moved: no knob changed.", icon=":material/info:")
                return
            described = ", ".join(f"{n} → {texts.number(v)}" for n, v in changes.items())
            send(
                lambda run_id: engine.update(run_id, **changes),
                run.id,
                f"{described} from the next step",
            )


def controls(run: RunStatus) -> None:
    """Pause or resume, and stop, for a run whose process takes commands; resume from
    its last checkpoint for a stopped or interrupted run; fork from any checkpoint, and
    download the model of one; clone always; and its family (parent and forks) when it
    has one."""
    pause, stop, fork, keep, clone = st.columns(5)
    buttons = (
        (
            pause,
            "Resume",
            ":material/play_arrow:",
            engine.resume,
            "Resumed",
            run.status == "paused",
        ),
        (pause, "Pause", ":material/pause:", engine.pause, "Paused", run.status != "paused"),
        (stop, "Stop", ":material/stop:", engine.stop, "Stopped", True),
    )
    for column, label, icon, action, done, shown in buttons:
        if run.steerable and shown:
            column.button(
                label,
                icon=icon,
                key=f"{label.lower()}:{run.id}",
                on_click=send,
                args=(action, run.id, done),
                width="stretch",
            )
    saved = engine.checkpoints(run.id)
    if saved:
        # Keyed by the forks taken: once one starts, a new popover, closed, takes its place.
        forks = sum(other.parent == run.id for other in runs.values())
        popover = fork.popover(
            "Fork", icon=":material/call_split:", width="stretch", key=f"forks:{run.id}:{forks}"
        )
        with popover:
            fork_form(run, [checkpoint.step for checkpoint in saved])
        with keep.popover("Model", icon=":material/download:", width="stretch"):
            downloads.model_download(engine, run, saved)
    if saved and run.resumable:
        pause.button(
            "Resume",
            icon=":material/play_arrow:",
            key=f"continue:{run.id}",
            on_click=resume,
            args=(run.id, saved[-1].step),
            width="stretch",
            help=f"Continue from its last checkpoint, at step {saved[-1].step:,}, under the "
            "same id: what it logged after that step is trained again.",
        )
    if clone.button(
        "Clone",
        icon=":material/content_copy:",
        key=f"clone:{run.id}",
        width="stretch",
        help="Open this run's config in Train, to tweak and rerun.",
    ):
        state.open_page("pages/1_Train.py", **{state.PREFILL: run.config})
    relatives = views.family(runs, run.id)
    if len(relatives) > 1 and stop.button(
        "What if",
        icon=":material/account_tree:",
        key=f"family:{run.id}",
        width="stretch",
        help="Watch this run with its parent and every fork, overlaid.",
    ):
        state.open_page("pages/2_Live.py", **{state.WATCH: relatives})


def run_panel(run: RunStatus) -> None:
    """A run's status and progress (refreshed every 2 s while it trains), its controls
    and knob sliders (drawn again only when something is clicked, or the run ends)."""
    with st.container(border=True):
        # Ticks while the run trains; an ended run's panel stays as it is.
        st.fragment(
            progress,
            run_every=state.refresh_interval(run.active, state.PROGRESS_REFRESH_SECONDS),
        )(run.id, run.active)
        # A row of their own: beside the title, four buttons in two fifths of a page
        # column were cut to "R…" and "F…" on a laptop screen.
        controls(run)
        if run.status == "diverged" and run.final_metrics:
            st.error(
                f"Diverged: the loss was not finite at step "
                f"{run.final_metrics.get('diverged_at')}. Metrics before it are kept.",
                icon=":material/trending_up:",
            )
        if run.error:
            views.show_error(run)
        if run.config.get("kind") == LR_FIND:
            st.fragment(range_test.panel, run_every=state.refresh_interval(run.active))(
                run.id, run.active, lambda rate: train_with(run, rate)
            )
        if run.active and run.steerable:
            with st.expander("Change knobs while it trains", icon=":material/tune:"):
                knob_form(run)
        elif run.active:
            st.caption("The process that trains this run has ended; it cannot be steered.")
        elif saved := engine.checkpoints(run.id):
            with st.expander("Loss landscape", icon=":material/landscape:"):
                landscape.panel(run.id, [checkpoint.step for checkpoint in saved])


def train_with(test: RunStatus, rate: float) -> None:
    """Opens Train with the config of a range test's run, at the rate it suggests."""
    config = training_config(RunConfig.from_dict(test.config), float(f"{rate:.3g}"))
    state.open_page("pages/1_Train.py", **{state.PREFILL: config.to_dict()})


def progress(run_id: str, was_active: bool) -> None:
    """The run's name, status, knobs now, step, speed and ETA."""
    run = engine.status(run_id)
    st.markdown(
        f"**{escape_markdown(run.name)}** :gray[{escape_markdown(run.id)}] · "
        f"{texts.badge(run.status)}  \n"
        f"{escape_markdown(texts.knobs(run))}"
    )
    speed = f"{run.steps_per_second:.1f} steps/s" if run.steps_per_second else ""
    eta = f"ETA {texts.duration(run.eta_seconds)}" if run.eta_seconds else ""
    text = " · ".join(p for p in (f"step {run.step}/{run.total_steps or '?'}", speed, eta) if p)
    st.progress(min(run.progress, 1.0), text=text)
    if was_active and not run.active:
        st.rerun()  # it ended: the whole page again, with its last charts, controls gone


runs, selected = views.pick_runs(
    engine,
    SELECTION,
    state.WATCH,
    default=lambda runs: [r.id for r in runs if r.active][:4] or [r.id for r in runs[:1]],
)
if not selected:
    st.info(
        "Nothing to watch yet: start a run on **Train**, or the demo race on **Home**.",
        icon=":material/info:",
    )
    st.stop()
any_active = any(runs[i].active for i in selected)


def group_figures(shown: list[RunView], start: int | None, end: int | None) -> dict[str, go.Figure]:
    """Each group of repeats among the runs shown, as its mean and 95% band (of the runs'
    means over each bucket of steps, for a long run: see `views.step_range`)."""
    metrics = {
        view.run_id: engine.overview(view.run_id, start=start, end=end, means=True)
        for view in shown
    }
    found = groups(runs[view.run_id] for view in shown)
    series = {
        f"{group_label(members)} ×{len(members)}": [metrics[run.id] for run in members]
        for members in found.values()
    }
    return {f"groups/{key}": group_figure(series, key) for key in GROUP_KEYS}


# One group of charts at a time: each chart is redrawn in every open tab at every refresh.
VIEWS = {
    "Training": training_figures,
    "Per layer": layer_figures,
    "Instruments": instrument_figures,
}
GROUP_KEYS = ("loss", "val_accuracy")
GROUPS = "Groups"  # the repeats watched, as means with bands
watched_groups = any(len(members) > 1 for members in groups(runs[i] for i in selected).values())


def recent(run: RunStatus) -> bool:
    """Whether `run` started (or was queued) less than `FIRST_POINT_WAIT` ago."""
    return time.time() - run.created < FIRST_POINT_WAIT


# A run's first point comes a second or two after its start: until every watched run
# that started (or was queued) in the last half minute has one, the charts look every
# second, so that the first refresh after it draws it.
waiting = {i for i in selected if runs[i].active and runs[i].step == 0 and recent(runs[i])}


@st.fragment(
    run_every=state.refresh_interval(
        any_active, state.REFRESH_SECONDS if waiting else state.CHART_REFRESH_SECONDS
    )
)
def charts(run_ids: list[str]) -> None:
    """One group of charts, redrawn less often than the panels: each redraw costs every
    open tab's browser more than the page server, on the cores the runs train on."""
    names = [*VIEWS, GROUPS] if watched_groups else list(VIEWS)
    view = st.segmented_control("Charts", names, default="Training", key="live_charts")
    view = view or "Training"  # a click on the chosen one deselects it
    start, end = views.step_range("live")
    shown = [views.run_view(engine, engine.status(run_id), start, end) for run_id in run_ids]
    if view == "Instruments":
        st.caption(
            "Measured each at its own interval (the run's `*_every` fields; about 20 times "
            "a run when left empty), so that together they cost a bounded share of the "
            "step time. Heat strips show the first selected run."
        )
    figures = group_figures(shown, start, end) if view == GROUPS else VIEWS[view](shown)
    views.show_in_columns(figures, captions=INSTRUMENT_HELP, live=True)
    if waiting and all(
        len(run.metrics) or not recent(runs[run.run_id]) for run in shown if run.run_id in waiting
    ):
        st.rerun()  # their first points are drawn (or late): back to the slower redraws


for run_id in selected:
    run_panel(runs[run_id])
charts(selected)
