"""The Sweep page's form for a new population: what every member trains, the live knobs
to search and their ranges, and how members exploit and explore (`core.population`).

Its run fields are drawn as the sweep form's are (`ui.forms.field`, the same widgets);
what was typed goes through `PopulationPlan.create`, which names every bad field, shown
under the form. The members start through the store's serving engine, which drives the
population (`core.population.hosting`), so it outlives this page and the dashboard.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

import pandas as pd
import streamlit as st

from core.engine import RunConfig, run_fields
from core.engine.api import Runs
from core.knobs import InvalidInput
from core.population import Population, PopulationPlan
from core.population.lineage import population_names
from core.population.plan import DEFAULT_PERTURB, MAX_POPULATION
from core.store import StoreError
from core.sweep import MAX_SEED, SearchSpace, starting_dimension, sweepable_knobs
from core.sweep.objective import OBJECTIVE_NAMES, TIME_TO_TARGET
from ui import forms, population_view, sweep_form

ERRORS = "population:errors"
#: The population this session started last: the one the view shows until another is picked.
STARTED = "population:started"
SHOWN = ("optimizer", "model", "dataset", "batch_size", "log_every", "telemetry")
SPACE_COLUMNS = ("name", "low", "high", "log")
OBJECTIVES = (None, *(name for name in OBJECTIVE_NAMES if name != TIME_TO_TARGET))


def key(name: str) -> str:
    return f"population:{name}"


def live_knobs(optimizer: str) -> list[str]:
    """The knobs a population can search: the optimizer's live number knobs."""
    return [
        name
        for name, knob in sweepable_knobs(optimizer).items()
        if knob.live and knob.type in ("float", "int")
    ]


def new_population_form(engine: Runs) -> None:
    """The form, open while the store has no population; "Start population" hands one to
    the engine, and the view below shows it."""
    fields = run_fields()
    errors: dict[str, str] = st.session_state.get(ERRORS, {})
    first = not population_names(engine.list()) and STARTED not in st.session_state
    with st.expander("New population", expanded=first or bool(errors)):
        base_col, search_col = st.columns(2)
        with base_col:
            st.markdown("**What every member trains**")
            for name in SHOWN:
                forms.field(fields[name], key(name), errors)
        with search_col:
            st.markdown("**Live knobs to search**")
            optimizer = st.session_state[key("optimizer")]
            table = key(f"space:{optimizer}")
            rate = starting_dimension(sweepable_knobs(optimizer)["learning_rate"]).to_row()
            st.session_state.setdefault(f"{table}:data", [{c: rate[c] for c in SPACE_COLUMNS}])
            frame = forms.table(
                table,
                SPACE_COLUMNS,
                {
                    "name": st.column_config.SelectboxColumn(
                        "knob",
                        options=live_knobs(optimizer),
                        help="A live knob of the optimizer: explore changes it while a "
                        "member trains.",
                    ),
                    "log": st.column_config.CheckboxColumn("log scale"),
                },
                fill=lambda row, cells: {
                    c: v
                    for c, v in sweep_form.with_range(optimizer, row, cells).items()
                    if c in SPACE_COLUMNS
                },
            )
            settings = population_settings()
        if st.button("Start population", type="primary", key=key("start")):
            start(engine, frame, settings)
            st.rerun()  # each refusal shows below; a population started shows in the view
        for name, reason in errors.items():
            if name not in SHOWN:  # shown under its field
                forms.error(name, reason)


def population_settings() -> dict[str, Any]:
    """How the population trains and moves, as `PopulationPlan.create` takes them."""
    values: dict[str, Any] = {
        "population": st.number_input(
            "members",
            2,
            MAX_POPULATION,
            3,
            key=key("members"),
            help="All train at once: at most the runs the engine trains at once "
            "(`optlab serve --max-concurrent`; the dashboard's engine: 3).",
        ),
        "interval": st.number_input("steps between exploits", 1, 10**6, 100, key=key("interval")),
        "generations": st.number_input("intervals a member trains", 2, 1000, 5, key=key("gen")),
        "quantile": st.number_input(
            "share at each end of the ranking", 0.01, 0.5, 0.25, key=key("quantile")
        ),
        "resample": st.number_input(
            "chance a copied knob is drawn afresh", 0.0, 1.0, 0.25, key=key("resample")
        ),
        "objective": st.selectbox(
            "ranked by",
            OBJECTIVES,
            format_func=lambda name: name or "the dataset's metric",
            key=key("objective"),
        ),
    }
    perturb = st.text_input(
        "perturbation factors", ",".join(f"{f:g}" for f in DEFAULT_PERTURB), key=key("perturb")
    )
    try:
        values["perturb"] = tuple(float(part) for part in perturb.split(","))
    except ValueError:
        values["perturb"] = perturb  # refused by the plan, naming `perturb`
    seed = st.number_input("seed (empty: a random one)", 0, MAX_SEED, None, key=key("seed"))
    values["seed"] = secrets.randbelow(MAX_SEED + 1) if seed is None else int(seed)
    return values


def start(engine: Runs, frame: pd.DataFrame, settings: dict[str, Any]) -> None:
    """Hands the population the form describes to the engine; or keeps why not."""
    fields = run_fields()
    try:
        values, errors = forms.parsed((fields[name] for name in SHOWN), key)
        if errors:
            raise InvalidInput(errors)
        rows = [{**row, "points": 3, "choices": ""} for row in frame.to_dict("records")]
        plan = PopulationPlan.create(
            RunConfig.from_dict(values), SearchSpace.from_rows(rows), **settings
        )
        name = f"pbt-{time.strftime('%Y%m%d-%H%M%S')}"
        Population(engine, plan, name).submit()
    except InvalidInput as exc:
        st.session_state[ERRORS] = exc.errors
    except StoreError as exc:
        sweep_form.failed("Not started", exc)
    else:
        st.session_state.pop(ERRORS, None)
        st.session_state[STARTED] = name
        st.session_state[population_view.PICKED] = name  # drawn below, after this form
