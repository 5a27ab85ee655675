"""A watched run's panel on Live: its progress, its controls (pause, stop, resume, fork,
model, clone, family), the sliders of its live knobs, and its range test or landscape.

Every function takes the runs it acts on (`Runs`) and the runs listed (`listed`, by id)
as arguments. A knob change is validated once in this process, by `Runs.update` when
Apply sends it: each knob's slider (coarse steps) and number field (any value) hold one
value, kept within the knob's declared range, and a refusal is shown as a toast naming
the knob.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import streamlit as st

from core.engine import RunConfig, RunStatus
from core.engine.api import Runs
from core.engine.client import EngineUnavailable
from core.engine.lr_find import training_config
from core.escaping import escape_markdown
from core.knobs import InvalidInput, Knob
from core.store import Command, UnknownRunError
from core.training.config import LR_FIND
from core.training.live import live_knobs, weighted_task
from ui import (
    downloads,
    landscape_view,
    nav,
    privacy_odometer,
    range_test,
    roles,
    state,
    texts,
    views,
)

# The live-knob arithmetic -----------------------------------------------------------


def slider_values(knob: Knob, value: float) -> list[float]:
    """1-2-5 steps over four decades either side of `value`, within the knob's declared
    range (0 only where it allows it), plus `value` itself."""
    candidates = {value, 0.0}
    for exponent in range(-9, 7):
        for mantissa in (1, 2, 5):
            candidates.add(float(f"{mantissa}e{exponent}"))
    span = max(abs(value), 1e-8)
    return sorted(
        v
        for v in candidates
        if (v == 0.0 or span / 1e4 <= v <= span * 1e4) and (v == value or in_range(knob, v))
    )


def in_range(knob: Knob, value: float) -> bool:
    """Whether `value` lies in the knob's declared range (its ends open or closed)."""
    above = knob.low is None or value > knob.low or (value == knob.low and not knob.low_open)
    below = knob.high is None or value < knob.high or (value == knob.high and not knob.high_open)
    return above and below


def on_knobs(run: RunStatus) -> list[Knob]:
    """The run's live knobs that are on (a multi-task run's task weights too); none for a
    script's Keras optimizer (`LabCallback`), which is not one of the lab's."""
    try:
        knobs = live_knobs(run.config["optimizer"], bool(run.config.get("multitask")))
    except InvalidInput:
        return []
    return [knob for knob in knobs if run.knobs.get(knob.name) is not None]


def fork_changes(
    run: RunStatus, knobs: Mapping[str, float], max_steps: int, name: str
) -> dict[str, object]:
    """What a fork changes of `run`: the knobs moved away from the run's value now, its
    length, and its name when one is typed."""
    changes: dict[str, object] = {
        knob: value for knob, value in knobs.items() if value != float(run.knobs[knob])
    }
    if max_steps != run.total_steps:
        changes["max_steps"] = int(max_steps)
    if name.strip():
        changes["name"] = name.strip()
    return changes


# Commands -------------------------------------------------------------------------


def send(engine: Runs, action: Callable[[str], Command | None], run_id: str, done: str) -> None:
    """A button's command to the run's process; a refusal is shown, not raised."""
    try:
        command = action(run_id)
        if command is not None:  # handed to another process: its answer
            command = engine.settle(command)
    except (InvalidInput, UnknownRunError) as exc:
        st.toast(f"Not done: {escape_markdown(str(exc))}", icon=":material/warning:")
        return
    if command is not None and command.error:
        st.toast(f"Not done: {escape_markdown(command.error)}", icon=":material/warning:")
    else:
        st.toast(done, icon=":material/check:")


def resume(engine: Runs, run_id: str, step: int) -> None:
    """Continues an ended run from its last checkpoint, in the engine process."""
    try:
        engine.resume(run_id)
    except (InvalidInput, UnknownRunError, EngineUnavailable) as exc:
        st.toast(f"Not resumed: {escape_markdown(str(exc))}", icon=":material/warning:")
    else:
        st.toast(f"Resuming from step {step:,}", icon=":material/play_arrow:")


def train_with(test: RunStatus, rate: float) -> None:
    """Opens Train with the config of a range test's run, at the rate it suggests."""
    config = training_config(RunConfig.from_dict(test.config), float(f"{rate:.3g}"))
    state.open_page(nav.TRAIN.file, **{state.PREFILL: config.to_dict()})


# Forms ----------------------------------------------------------------------------


def fork_form(engine: Runs, run: RunStatus, saved: list[int]) -> None:
    """Pick a checkpoint, change live knobs, the length or the name, and start a fork;
    then watch it beside its parent."""
    # A fork changes its optimizer's knobs; its task weights are its parent's.
    live = [knob for knob in on_knobs(run) if weighted_task(knob.name) is None]
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
    try:
        fork_id = engine.fork(run.id, step, **fork_changes(run, chosen, int(max_steps), name))
    except (InvalidInput, UnknownRunError, EngineUnavailable) as exc:
        st.error(f"Not forked: {escape_markdown(str(exc))}", icon=":material/warning:")
        return
    state.open_page(nav.LIVE.file, **{state.WATCH: [run.id, fork_id]})


def knob_keys(run: RunStatus, knob: Knob) -> tuple[str, str]:
    """The session-state keys of a knob's slider and number field. A new current value
    (from here, another tab or the CLI) makes new ones, so a stale value is never sent."""
    now = float(run.knobs[knob.name])
    return f"knob:{run.id}:{knob.name}:{now!r}", f"knob-field:{run.id}:{knob.name}:{now!r}"


def slid(slider: str, field: str) -> None:
    """The slider's callback: the number field shows the value slid to."""
    st.session_state[field] = st.session_state[slider]


def typed(knob: Knob, slider: str, field: str) -> None:
    """The number field's callback: the slider moves to the value typed; one outside the
    knob's range is refused, and the field shows the slider's value again."""
    value = st.session_state[field]
    if value is not None and in_range(knob, float(value)):
        st.session_state[slider] = float(value)
        return
    st.session_state[field] = st.session_state[slider]
    st.toast(
        f"{escape_markdown(knob.name)}: must be in {knob.range_text()}",
        icon=":material/warning:",
    )


def knob_input(run: RunStatus, knob: Knob) -> float:
    """A live knob's slider, in 1-2-5 steps about its value now, and under it a number
    field for any value between them, both bound to one value; returns it."""
    slider, field = knob_keys(run, knob)
    now = float(run.knobs[knob.name])
    # Seeded through session state, not `value=`: the callbacks then own both widgets.
    st.session_state.setdefault(slider, now)
    st.session_state.setdefault(field, now)
    chosen = st.session_state[slider]
    st.select_slider(
        knob.name,
        sorted({*slider_values(knob, now), chosen}),
        key=slider,
        format_func=texts.number,
        help=escape_markdown(knob.help),
        on_change=slid,
        args=(slider, field),
    )
    st.number_input(
        knob.name,
        key=field,
        format="%g",
        step=field_step(now),
        label_visibility="collapsed",
        on_change=typed,
        args=(knob, slider, field),
    )
    return float(st.session_state[slider])


def field_step(value: float) -> float:
    """What − and + add to a knob's number field: a tenth of its value's decade."""
    return 10.0 ** (math.floor(math.log10(abs(value))) - 1) if value else 1e-3


def knob_form(engine: Runs, run: RunStatus) -> None:
    """A slider and a number field per live knob that is on, set at its current value;
    nothing changes until Apply, and then only the knobs moved away from the value they
    showed. Moving or typing only reruns the page: no command is sent."""
    live = on_knobs(run)
    if not live:
        st.caption("Its optimizer has no live knob the lab can change.")
        return
    shown: dict[str, tuple[float, float]] = {}
    for column, knob in zip(st.columns(len(live)), live, strict=True):
        with column:
            shown[knob.name] = (float(run.knobs[knob.name]), knob_input(run, knob))
    if st.button("Apply", icon=":material/tune:", key=f"apply:{run.id}"):
        changes = {name: value for name, (now, value) in shown.items() if value != now}
        if not changes:
            st.toast("Nothing moved: no knob changed.", icon=":material/info:")
            return
        described = ", ".join(f"{n} → {texts.number(v)}" for n, v in changes.items())
        send(
            engine,
            lambda run_id: engine.update(run_id, **changes),
            run.id,
            f"{described} from the next step",
        )


# The panel ------------------------------------------------------------------------


def controls(engine: Runs, run: RunStatus, listed: Mapping[str, RunStatus]) -> None:
    """Pause or resume, and stop, for a run whose process takes commands; resume from
    its last checkpoint for a stopped or interrupted run; fork from any checkpoint, and
    download the model of one; clone always; and its family (parent and forks, among
    `listed`) when it has one."""
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
                args=(engine, action, run.id, done),
                width="stretch",
            )
    saved = engine.checkpoints(run.id)
    if saved:
        # Keyed by the forks taken: once one starts, a new popover, closed, takes its place.
        forks = sum(other.parent == run.id for other in listed.values())
        popover = fork.popover(
            "Fork", icon=":material/call_split:", width="stretch", key=f"forks:{run.id}:{forks}"
        )
        with popover:
            fork_form(engine, run, [checkpoint.step for checkpoint in saved])
        with keep.popover("Model", icon=":material/download:", width="stretch"):
            downloads.model_download(engine, run, saved)
    if saved and run.resumable:
        pause.button(
            "Resume",
            icon=":material/play_arrow:",
            key=f"continue:{run.id}",
            on_click=resume,
            args=(engine, run.id, saved[-1].step),
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
        state.open_page(nav.TRAIN.file, **{state.PREFILL: run.config})
    relatives = views.family(listed, run.id)
    if len(relatives) > 1 and stop.button(
        "What if",
        icon=":material/account_tree:",
        key=f"family:{run.id}",
        width="stretch",
        help="Watch this run with its parent and every fork, overlaid.",
    ):
        state.open_page(nav.LIVE.file, **{state.WATCH: relatives})


def run_panel(engine: Runs, run: RunStatus, listed: Mapping[str, RunStatus]) -> None:
    """A run's status and progress (refreshed every 2 s while it trains), its controls
    and knob sliders (drawn again only when something is clicked, or the run ends)."""
    with st.container(border=True):
        # Ticks while the run trains; an ended run's panel stays as it is.
        st.fragment(
            progress,
            run_every=state.refresh_interval(run.active, state.PROGRESS_REFRESH_SECONDS),
        )(engine, run.id, run.active)
        # A row of their own: beside the title, four buttons in two fifths of a page
        # column were cut to "R…" and "F…" on a laptop screen.
        if roles.presents():  # a viewer of a live demo watches
            controls(engine, run, listed)
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
                engine, run.id, run.active, lambda rate: train_with(run, rate)
            )
        if run.active and run.steerable:
            if roles.presents():
                with st.expander("Change knobs while it trains", icon=":material/tune:"):
                    knob_form(engine, run)
        elif run.active:
            st.caption("The process that trains this run has ended; it cannot be steered.")
        elif saved := engine.checkpoints(run.id):
            with st.expander("Loss landscape", icon=":material/landscape:"):
                landscape_view.panel(engine, run.id, [checkpoint.step for checkpoint in saved])


def progress(engine: Runs, run_id: str, was_active: bool) -> None:
    """The run's name, status, knobs now, step, and while it trains its speed and ETA;
    before its first step, what it waits for (`texts.progress`)."""
    run = engine.status(run_id)
    st.markdown(
        f"**{escape_markdown(run.name)}** :gray[{escape_markdown(run.id)}] · "
        f"{texts.badge(run.status)}  \n"
        f"{escape_markdown(texts.knobs(run))}"
    )
    loading = engine.loading() if run.status == "queued" else None
    st.progress(min(run.progress, 1.0), text=texts.progress(run, loading))
    privacy_odometer.odometer(engine, run)  # a DP-SGD run's ε spent
    if was_active and not run.active:
        st.rerun()  # it ended: the whole page again, with its last charts, controls gone
