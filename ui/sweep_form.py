"""The Sweep page's form for a new sweep: what every trial trains, and what to search.

What every trial trains is a `RunConfig`: the run fields it shows are drawn as Train's are,
from `run_fields()` through `ui.forms.field` (the same widget, default and help), and what
was typed goes through `RunConfig.from_dict`, once; the fields it does not show keep
their defaults. The sweep's own settings (the search space, the sampler, the budget) go
to `Sweep`, which validates them. Every refusal is kept, by field, and shown under the
field, or under the form.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st

from core.engine import RunConfig, run_fields
from core.engine.api import Runs
from core.engine.repeats import MAX_REPEATS
from core.escaping import escape_markdown
from core.knobs import InvalidInput, Knob
from core.redaction import redacted
from core.store import StoreError
from core.sweep import (
    MAX_SEED,
    SAMPLERS,
    SearchSpace,
    Sweep,
    starting_dimension,
    sweepable_knobs,
)
from ui import forms, roles, state, sweep_actions, sweep_objective, texts

ERRORS = "sweep_errors"
STARTED = "sweep:started"  # the study this session started last, shown until a pick
#: The run fields the form shows, at `RunConfig`'s defaults; the others keep them.
SHOWN = (
    "optimizer",
    "model",
    "dataset",
    "batch_size",
    "epochs",
    "max_steps",
    "log_every",
    "val_every",
    "telemetry",
)
SPACE_COLUMNS = ("name", "low", "high", "log", "points", "choices")
RANGE_COLUMNS = ("low", "high", "log", "choices")  # what picking a knob fills in


def key(name: str) -> str:
    """The session-state key of a run field's widget."""
    return f"sweep:{name}"


def space_key(optimizer: str) -> str:
    """The search space table's key: one table for each optimizer, whose knobs it offers."""
    return f"sweep:dimensions:{optimizer}"


def dimension_rows(optimizer: str) -> list[dict[str, Any]]:
    """The search space the form starts from: the learning rate, a decade either side of
    the optimizer's default, on a log scale, at 3 grid points."""
    start = starting_dimension(sweepable_knobs(optimizer)["learning_rate"])
    return [{**start.to_row(), "points": 3}]


def with_range(optimizer: str, row: dict[str, Any], cells: Mapping[str, Any]) -> dict[str, Any]:
    """`row` once a knob is picked in it: the knob's starting range (or every choice), and
    its grid points unless given; what the edit set itself wins."""
    name = cells.get("name")
    knob = sweepable_knobs(optimizer).get(name) if isinstance(name, str) else None
    if knob is None:
        return row
    start = starting_dimension(knob).to_row()
    filled = {column: start[column] for column in RANGE_COLUMNS}
    if pd.isna(row.get("points")):
        filled["points"] = start["points"]
    return {**row, **filled, **cells}


def run_field(knob: Knob, errors: Mapping[str, str]) -> None:
    """A run field's widget, as Train draws it (`forms.field`), with why it was refused."""
    forms.field(knob, key(knob.name), errors)
    if knob.name in ("model", "dataset"):
        st.caption(texts.described(knob.name, st.session_state[key(knob.name)]))


def base_config(fields: Mapping[str, Knob]) -> RunConfig:
    """What every trial trains, from the form; raises `InvalidInput` naming each bad
    field."""
    values, errors = forms.parsed((fields[name] for name in SHOWN), key)
    try:
        config = RunConfig.from_dict(values)  # what did not parse at its default
    except InvalidInput as exc:
        errors = exc.errors | errors
    if errors:
        raise InvalidInput(errors)
    return config


def new_sweep_form(engine: Runs) -> None:
    """The form, folded once this server drives a sweep; "Start sweep" starts one, and
    folds the form, so that its progress, drawn below, is in view."""
    fields = run_fields()  # read at each run: a plugin loaded since shows
    errors: dict[str, str] = st.session_state.get(ERRORS, {})
    driven = len(state.sweeps())
    # Keyed by the sweeps open: a new expander, folded, once one starts (one drawn again
    # under the same key keeps whatever the browser last made of it).
    with st.expander("New sweep", expanded=not driven, key=f"sweep:form:{driven}"):
        base_col, search_col = st.columns(2)
        with base_col:
            st.markdown("**What every trial trains**")
            for name in SHOWN:
                run_field(fields[name], errors)
        with search_col:
            st.markdown("**What to search**")
            optimizer = st.session_state[key("optimizer")]
            table = space_key(optimizer)
            st.session_state.setdefault(f"{table}:data", dimension_rows(optimizer))
            frame = forms.table(
                table,
                SPACE_COLUMNS,
                {
                    "name": st.column_config.SelectboxColumn(
                        "knob",
                        options=list(sweepable_knobs(optimizer)),
                        help="A run field or a knob of the optimizer; picking one fills in "
                        "a range it takes, or its choices.",
                    ),
                    "log": st.column_config.CheckboxColumn("log scale"),
                    "points": st.column_config.NumberColumn("grid points", min_value=1),
                    "choices": st.column_config.TextColumn("or choices (a, b, …)"),
                },
                fill=functools.partial(with_range, optimizer),
            )
            settings = search_settings() | sweep_objective.settings(key("dataset"))
        if st.button("Start sweep", type="primary", key="sweep:start"):
            start(engine, fields, frame, settings)
            if st.session_state.get(ERRORS) or len(state.sweeps()) > driven:
                st.rerun()  # each refusal shows under its field; a sweep started folds it
        for name, reason in errors.items():
            if name not in SHOWN:  # shown under its field
                forms.error(name, reason)


def search_settings() -> dict[str, Any]:
    """How to search: the sampler, the budget, the trials at once, the seeds per trial,
    the sampler's seed and pruning, as `Sweep` takes them."""
    sampler = st.radio(
        "search",
        SAMPLERS,
        index=SAMPLERS.index("tpe"),
        horizontal=True,
        key="sweep:sampler",
        persist_state=state.KEPT,
    )
    n_trials = st.number_input(
        "trials (empty for a grid: every point)",
        1,
        10_000,
        8,
        key="sweep:n_trials",
        placeholder="every grid point",
        persist_state=state.KEPT,
    )
    parallel = st.number_input(
        "trials at once", 1, 16, 2, key="sweep:parallel", persist_state=state.KEPT
    )
    repeats = st.number_input(
        "seeds per trial",
        1,
        MAX_REPEATS,
        1,
        key="sweep:repeats",
        persist_state=state.KEPT,
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
        persist_state=state.KEPT,
    )
    pruning = st.toggle(
        "prune trials that trail", True, key="sweep:pruning", persist_state=state.KEPT
    )
    return {
        "n_trials": None if n_trials is None else int(n_trials),
        "sampler": sampler,
        "pruning": pruning,
        "parallel": int(parallel),
        "repeats": int(repeats),
        "seed": None if seed is None else int(seed),
    }


@roles.presenter_only("start a sweep")  # its study is written before a run starts
def start(
    engine: Runs, fields: dict[str, Knob], frame: pd.DataFrame, settings: dict[str, Any]
) -> None:
    """Starts the sweep the form describes, and remembers it; or keeps why not."""
    try:
        sweep = Sweep(
            engine,
            base_config(fields),
            SearchSpace.from_rows(frame.to_dict("records")),
            **settings,
        )
        sweep_actions.hand_over(sweep)  # the engine process drives it
    except InvalidInput as exc:
        st.session_state[ERRORS] = exc.errors
    except StoreError as exc:
        failed("Not started", exc)
    else:
        st.session_state.pop(ERRORS, None)
        state.sweeps()[sweep.study_name] = sweep
        st.session_state[STARTED] = sweep.study_name


def failed(what: str, exc: Exception) -> None:
    """What failed and why (the storage's or the store's error), as a message rather
    than a traceback, without the secrets of a URL it quotes."""
    st.error(f"{what}: {escape_markdown(redacted(str(exc)))}", icon=":material/error:")
