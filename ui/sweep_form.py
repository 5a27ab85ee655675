"""The Sweep page's form for a new sweep: what every trial trains, and what to search.

What every trial trains is a `RunConfig`: its fields are drawn from `run_fields()` through
`ui.forms`, as Train's are, and what was typed goes through `RunConfig.from_dict`, once;
the sweep's own settings (the search space, the sampler, the budget) go to `Sweep`, which
validates them. Every refusal is kept, by field, and shown under the form.
"""

from __future__ import annotations

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
from core.sweep import MAX_SEED, SAMPLERS, SearchSpace, Sweep, sweepable_knobs
from ui import forms, roles, state, texts

ERRORS = "sweep_errors"
STARTED = "sweep:started"  # the study this session started last, shown until a pick
#: The run fields a sweep sets; the others keep their defaults.
CHOSEN = ("optimizer", "model", "dataset")  # picked from the knob's choices
STEPPED = ("epochs", "val_every")  # whole numbers, with − and +
#: Where a sweep's form starts, unlike Train's: a plain optimizer, short trials.
DEFAULTS = {"optimizer": "sgd", "epochs": 3}
LABELS = {"val_every": "validate every (steps, empty: each epoch)"}
LOG_EVERY = 10  # trials log every 10 steps: many runs, compared by their best value


def key(name: str) -> str:
    """The session-state key of a run field's widget."""
    return f"sweep:{name}"


def dimension_rows(optimizer: str) -> list[dict[str, Any]]:
    """The search space the form starts from: the learning rate, a decade either side of
    the optimizer's default, on a log scale."""
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


def run_field(knob: Knob) -> None:
    """A run field's widget, seeded with the sweep's default (else the field's)."""
    st.session_state.setdefault(key(knob.name), DEFAULTS.get(knob.name, knob.default))
    if knob.name in STEPPED:
        forms.stepper(knob, key(knob.name), label=LABELS.get(knob.name))
    else:
        forms.widget(knob, key(knob.name))
    if knob.name in ("model", "dataset"):
        st.caption(texts.described(knob.name, st.session_state[key(knob.name)]))


def base_config(fields: dict[str, Knob]) -> RunConfig:
    """What every trial trains, from the form; raises `InvalidInput` naming each bad
    field."""
    values = {
        name: forms.parse(fields[name], forms.value(fields[name], key(name)))
        for name in (*CHOSEN, *STEPPED)
    }
    return RunConfig.from_dict({**values, "log_every": LOG_EVERY})


def new_sweep_form(engine: Runs) -> None:
    """The form, folded once this server drives a sweep; "Start sweep" starts one."""
    fields = run_fields()  # read at each run: a plugin loaded since shows
    with st.expander("New sweep", expanded=not state.sweeps()):
        base_col, search_col = st.columns(2)
        with base_col:
            st.markdown("**What every trial trains**")
            for name in (*CHOSEN, *STEPPED):
                run_field(fields[name])
        with search_col:
            st.markdown("**What to search**")
            optimizer = st.session_state[key("optimizer")]
            frame = st.data_editor(
                pd.DataFrame(dimension_rows(optimizer)),
                num_rows="dynamic",
                hide_index=True,
                key=f"sweep:dimensions:{optimizer}",
                width="stretch",
                column_config={
                    "name": st.column_config.SelectboxColumn(
                        "knob", options=list(sweepable_knobs(optimizer))
                    ),
                    "log": st.column_config.CheckboxColumn("log scale"),
                    "points": st.column_config.NumberColumn("grid points", min_value=1),
                    "choices": st.column_config.TextColumn("or choices (a, b, …)"),
                },
            )
            settings = search_settings()
        if st.button("Start sweep", type="primary", key="sweep:start"):
            start(engine, fields, frame, settings)
        for name, reason in st.session_state.get(ERRORS, {}).items():
            forms.error(name, reason)


def search_settings() -> dict[str, Any]:
    """How to search: the sampler, the budget, the trials at once, the seeds per trial,
    the sampler's seed and pruning, as `Sweep` takes them."""
    sampler = st.radio(
        "search", SAMPLERS, index=SAMPLERS.index("tpe"), horizontal=True, key="sweep:sampler"
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
        sweep.start()
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
