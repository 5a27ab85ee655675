"""The Playground's inputs: the surface, the racers and their knobs, the start and the
steps, as widgets of the session, read back into what to compute or an error per field.

A race is several optimizers, each with its knobs, or one optimizer at several values of
one knob (`VALUES_RACE`). The knobs are the optimizers' own `Knob`s, in the widgets the
Train form uses (`ui.forms.field`), under keys of this page's; every input is checked by
the playground's own validation (`core.playground.trajectory.checked`) before anything is
computed, and a bad one is shown under its field, as Train does.

What the widgets hold is the page's state (`shown_state`): what a room's presenter
publishes, and what a following viewer's widgets are set to (`ui.follow_presenter`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from core import optimizers
from core.knobs import InvalidInput, Knob, read_number
from core.optimizers.optimizer_catalog import COMMON_KNOBS
from core.playground import MAX_STEPS, SURFACES
from core.playground.trajectory import checked
from core.readable import number
from ui import forms, state

SURFACE = "playground:surface"
RACE = "playground:race"
OPTIMIZERS = "playground:optimizers"  # a race of optimizers: which
OPTIMIZER = "playground:optimizer"  # a race of values: the optimizer,
VARY = "playground:vary"  # the knob,
VALUES = "playground:values"  # and its values, as typed
X, Y, STEPS = "playground:x", "playground:y", "playground:steps"
STEP = "playground:step"  # the step the chart shows (None: the last); no widget's
PLAYING = "playground:playing"  # the last play started ({"from", "at"}); no widget's

OPTIMIZERS_RACE, VALUES_RACE = "several optimizers", "one optimizer, several values"
DEFAULT_SURFACE = "himmelblau"  # four minima: where each optimizer ends differs at once
DEFAULT_RACERS = ("sgd", "momentum", "adam")
DEFAULT_VARIED = ("sgd", "learning_rate", "0.001, 0.01, 0.02")
DEFAULT_STEPS = 300
MOST_RACERS = 6
PANELS_A_ROW = 3
#: The knobs each panel shows first, after the optimizer's own (momentum's μ, Adam's βs):
#: those the chart draws. The other common ones are folded under "More knobs".
GEOMETRY = ("learning_rate", "radius", "clip_norm", "weight_decay")
LEFT_OUT = ("layer_rules",)  # rules by a layer's name: the playground has one variable
_COMMON = {knob.name for knob in COMMON_KNOBS}


@dataclass(frozen=True)
class Racer:
    """One path to compute: its legend's label, the optimizer and every knob's value as
    read from its widgets (text read as numbers; validated by `checked`)."""

    label: str
    optimizer: str
    knobs: dict[str, Any]


@dataclass
class Race:
    """What the widgets ask for, read: the racers, the start and the steps; and why each
    field that did not read was refused, by field (`start`, `steps`, `values`) and, for
    knobs, by optimizer then knob (`knob_errors`)."""

    surface: str
    racers: list[Racer]
    start: tuple[float, float]
    steps: int
    errors: dict[str, str] = field(default_factory=dict)
    knob_errors: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        """Whether every field read and passed the playground's checks."""
        return not self.errors and not any(self.knob_errors.values())


def knob_key(optimizer: str, name: str) -> str:
    """The widget key of `optimizer`'s knob `name` on this page."""
    return f"playground:knob:{optimizer}:{name}"


def seed() -> None:
    """The widgets' first values (kept for the session, `state.KEPT`)."""
    surface = SURFACES[st.session_state.setdefault(SURFACE, DEFAULT_SURFACE)]
    st.session_state.setdefault(RACE, OPTIMIZERS_RACE)
    st.session_state.setdefault(OPTIMIZERS, list(DEFAULT_RACERS))
    for key, value in zip((OPTIMIZER, VARY, VALUES), DEFAULT_VARIED, strict=True):
        st.session_state.setdefault(key, value)
    st.session_state.setdefault(X, f"{surface.start[0]:g}")
    st.session_state.setdefault(Y, f"{surface.start[1]:g}")
    st.session_state.setdefault(STEPS, str(DEFAULT_STEPS))
    st.session_state.setdefault(STEP, None)
    st.session_state.setdefault(PLAYING, None)


def new_surface() -> None:
    """The surface's callback: its own start, every step shown."""
    surface = SURFACES[st.session_state[SURFACE]]
    st.session_state[X], st.session_state[Y] = (f"{v:g}" for v in surface.start)
    st.session_state[STEP] = None


def start_at(x: float, y: float) -> None:
    """The start moved to (x, y), to two decimals (a click's), every step shown."""
    st.session_state[X], st.session_state[Y] = f"{x:.2f}", f"{y:.2f}"
    st.session_state[STEP] = None


def names() -> list[str]:
    """Every optimizer's name, the plugins' included."""
    return [spec.name for spec in optimizers.specs()]


def controls(race: Race | None) -> None:
    """The surface and the kind of race in a row, its racers under them (in one row of
    three, at 1024 px the choices were cut to "rosenb…"); `race`'s errors under their
    fields."""
    errors = race.errors if race is not None else {}
    surface_col, race_col = st.columns(2)
    racers_col = st.container()
    surface_col.selectbox(
        "surface",
        list(SURFACES),
        key=SURFACE,
        on_change=new_surface,
        help="A classic 2-D test function; its minima are starred.",
        persist_state=state.KEPT,
    )
    race_col.selectbox(
        "race",
        (OPTIMIZERS_RACE, VALUES_RACE),
        key=RACE,
        help="Several optimizers from the same start, or one optimizer at several values of "
        "one of its knobs.",
        persist_state=state.KEPT,
    )
    with racers_col:
        if st.session_state[RACE] == OPTIMIZERS_RACE:
            st.multiselect(
                "optimizers",
                names(),
                key=OPTIMIZERS,
                max_selections=MOST_RACERS,
                help="Each is the lab's own Keras optimizer, stepping (x, y).",
                persist_state=state.KEPT,
            )
        else:
            varied(errors)


def start_fields(race: Race | None) -> None:
    """The start and the steps, in a row; `race`'s errors under them."""
    errors = race.errors if race is not None else {}
    x_col, y_col, steps_col, _ = st.columns([1, 1, 1, 3])
    x_col.text_input("start x", key=X, persist_state=state.KEPT, help="Or click the surface.")
    y_col.text_input("start y", key=Y, persist_state=state.KEPT, help="Or click the surface.")
    steps_col.text_input("steps", key=STEPS, persist_state=state.KEPT, help=f"1 to {MAX_STEPS:,}.")
    forms.show_error(errors, "start")
    forms.show_error(errors, "steps")


def varied(errors: Mapping[str, str]) -> None:
    """A race of values: the optimizer, the knob and its values."""
    optimizer_col, knob_col, values_col = st.columns([1, 1, 1.4])
    optimizer_col.selectbox("optimizer", names(), key=OPTIMIZER, persist_state=state.KEPT)
    spec = optimizers.get_spec(st.session_state[OPTIMIZER])
    numeric = [knob.name for knob in spec.knobs if knob.type in ("float", "int")]
    if st.session_state.get(VARY) not in numeric:
        st.session_state[VARY] = numeric[0]
    knob_col.selectbox("knob", numeric, key=VARY, persist_state=state.KEPT)
    values_col.text_input(
        "values",
        key=VALUES,
        persist_state=state.KEPT,
        help="Comma-separated: one racer each, up to six.",
    )
    forms.show_error(errors, "values")


def shown_knobs(spec: optimizers.OptimizerSpec) -> tuple[list[Knob], list[Knob]]:
    """`spec`'s knobs for its panel: those shown first (the rate, the optimizer's own,
    then radius, clip norm and weight decay) and the rest, folded."""
    knobs = [knob for knob in spec.knobs if knob.name not in LEFT_OUT]
    first = [k for k in knobs if k.name == "learning_rate"]
    first += [k for k in knobs if k.name not in _COMMON]
    first += [k for k in knobs if k.name in GEOMETRY and k not in first]
    return first, [k for k in knobs if k not in first]


def panels(race: Race | None) -> None:
    """A panel of knobs for each optimizer raced (in a race of values, its one optimizer
    without the knob varied), side by side, each error under its field."""
    raced = racing_optimizers()
    if not raced:
        return
    skipped = st.session_state[VARY] if st.session_state[RACE] == VALUES_RACE else None
    for i, name in enumerate(raced):
        if i % PANELS_A_ROW == 0:  # a row at a time: the panels read in the legend's order
            columns = st.columns(PANELS_A_ROW)
        spec = optimizers.get_spec(name)
        errors = race.knob_errors.get(name, {}) if race is not None else {}
        first, rest = shown_knobs(spec)
        with columns[i % PANELS_A_ROW].container(border=True):
            st.markdown(f"**{name}**")
            for knob in first:
                if knob.name != skipped:
                    forms.field(knob, knob_key(name, knob.name), errors)
            with st.expander("More knobs"):
                for knob in rest:
                    if knob.name != skipped:
                        forms.field(knob, knob_key(name, knob.name), errors)


def racing_optimizers() -> list[str]:
    """The optimizers the widgets race, each once."""
    if st.session_state[RACE] == VALUES_RACE:
        return [st.session_state[OPTIMIZER]]
    return list(st.session_state[OPTIMIZERS])


def read() -> Race:
    """What the widgets hold, read and checked (no path computed): the race, or its
    errors by field."""
    errors: dict[str, str] = {}
    knob_errors: dict[str, dict[str, str]] = {}
    knobs: dict[str, dict[str, Any]] = {}
    for name in racing_optimizers():
        spec = optimizers.get_spec(name)
        for knob in spec.knobs:
            if knob.name not in LEFT_OUT:
                forms.seed(knob, knob_key(name, knob.name))
        shown = [knob for knob in spec.knobs if knob.name not in LEFT_OUT]
        knobs[name], knob_errors[name] = forms.parsed(shown, functools.partial(knob_key, name))
    start = (0.0, 0.0)
    try:
        start = (_real(st.session_state[X]), _real(st.session_state[Y]))
    except ValueError as exc:
        errors["start"] = str(exc)
    steps: Any = None
    try:
        steps = read_number(str(st.session_state[STEPS]))
    except ValueError as exc:
        errors["steps"] = str(exc)
    racers = _racers(knobs, errors)
    race = Race(st.session_state[SURFACE], racers, start, steps, errors, knob_errors)
    for racer in racers:
        _check(race, racer)
    return race


def _real(text: str) -> float:
    return float(read_number(str(text), real=True))


def _racers(knobs: dict[str, dict[str, Any]], errors: dict[str, str]) -> list[Racer]:
    """The racers: one an optimizer, or, in a race of values, one a value (a value that
    does not read is an error of `values`)."""
    if st.session_state[RACE] == OPTIMIZERS_RACE:
        return [Racer(name, name, values) for name, values in knobs.items()]
    name, vary = st.session_state[OPTIMIZER], st.session_state[VARY]
    texts = [text.strip() for text in str(st.session_state[VALUES]).split(",") if text.strip()]
    if not 1 <= len(texts) <= MOST_RACERS:
        errors["values"] = f"must be 1 to {MOST_RACERS} values, comma-separated"
        return []
    racers = []
    for text in texts:
        try:
            value = read_number(text)
        except ValueError as exc:
            errors["values"] = str(exc)
            continue
        label = f"{vary} = {number(value)}"
        racers.append(Racer(label, name, {**knobs[name], vary: value}))
    return racers


def _check(race: Race, racer: Racer) -> None:
    """`racer` checked as `trajectory` checks it, each error put under its field: the
    knob varied in a race of values under `values`, naming the value."""
    if race.errors.get("start") or race.errors.get("steps"):
        start, steps = (0.0, 0.0), 1  # already refused: checked no further
    else:
        start, steps = race.start, race.steps
    try:
        checked(race.surface, racer.optimizer, racer.knobs, start, steps)
    except InvalidInput as exc:
        for name, why in exc.errors.items():
            if name in ("start", "steps", "surface", "optimizer"):
                race.errors.setdefault(name, why)
            elif st.session_state[RACE] == VALUES_RACE and name == st.session_state[VARY]:
                race.errors.setdefault("values", f"{racer.label}: {why}")
            else:
                race.knob_errors.setdefault(racer.optimizer, {}).setdefault(name, why)


def shown_state() -> dict[str, Any]:
    """The widgets' values that say what the page shows (the knobs of the optimizers
    raced alone), the step and the last play started: what a room's presenter
    publishes."""
    keys = [SURFACE, RACE, OPTIMIZERS, OPTIMIZER, VARY, VALUES, X, Y, STEPS, STEP, PLAYING]
    for name in racing_optimizers():
        keys += [
            knob_key(name, knob.name)
            for knob in optimizers.get_spec(name).knobs
            if knob.name not in LEFT_OUT
        ]
    return {key: st.session_state.get(key) for key in keys}
