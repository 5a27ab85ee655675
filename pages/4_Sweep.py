"""Sweep: search knobs and ranges with Optuna; every trial is a run, watched like any other."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from core import data, models
from core.charts import hyperparameter_figure
from core.engine import RunConfig
from core.knobs import InvalidHyperparameters
from core.sweep import SAMPLERS, Dimension, SearchSpace, Sweep, list_studies, sweepable_knobs
from ui import format, nav, state

st.set_page_config(page_title="Sweep · Optimizer Lab", page_icon="🧭", layout="wide")
nav.sidebar()
st.title("🧭 Sweep")
st.caption(
    "Grid or sampled search over any knob; Optuna prunes trials whose validation "
    "accuracy trails the others'. Studies live in the lab's SQLite file by default; "
    "a PostgreSQL URL lets several machines work on one study."
)

ERRORS = "sweep_errors"
SHOWN = "sweep_shown"
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


def read_dimensions(frame: pd.DataFrame) -> SearchSpace:
    """The editor's rows as dimensions: a range (low, high, log, grid points), or a
    comma-separated list of choices (numbers, true/false or names)."""
    dimensions = []
    for row in frame.to_dict("records"):
        if not isinstance(row.get("name"), str) or not row["name"]:
            continue
        choices = tuple(_choice(c) for c in str(row.get("choices") or "").split(",") if c.strip())
        if choices:
            dimensions.append(Dimension(row["name"], choices=choices))
        else:
            dimensions.append(
                Dimension(
                    row["name"],
                    low=_number(row.get("low")),
                    high=_number(row.get("high")),
                    log=bool(row.get("log")),
                    points=int(_number(row.get("points")) or 5),
                )
            )
    return SearchSpace(tuple(dimensions))


def _choice(text: str) -> Any:
    text = text.strip()
    if text.lower() in {"true", "false"}:
        return text.lower() == "true"
    try:
        number = float(text)
    except ValueError:
        return text
    return int(number) if number.is_integer() and "." not in text and "e" not in text else number


def _number(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def new_sweep_form() -> None:
    with st.expander("New sweep", expanded=not state.sweeps()):
        base_col, search_col = st.columns(2)
        with base_col:
            st.markdown("**What every trial trains**")
            optimizer = st.selectbox("optimizer", _optimizers(), key="sweep:optimizer")
            model = st.selectbox(
                "model",
                [m.name for m in models.catalog()],
                index=[m.name for m in models.catalog()].index("lenet"),
                key="sweep:model",
            )
            dataset = st.selectbox("dataset", [d.name for d in data.catalog()], key="sweep:dataset")
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
            pruning = st.toggle("prune trials that trail", True, key="sweep:pruning")
            storage = st.text_input(
                "storage (empty: the lab's SQLite file)",
                key="sweep:storage",
                placeholder="postgresql://user@host/db",
            )
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
                    read_dimensions(frame),
                    n_trials=None if n_trials is None else int(n_trials),
                    sampler=sampler,
                    pruning=pruning,
                    storage=storage or None,
                    parallel=int(parallel),
                )
                sweep.start()
            except InvalidHyperparameters as exc:
                st.session_state[ERRORS] = exc.errors
            else:
                st.session_state.pop(ERRORS, None)
                state.sweeps()[sweep.study_name] = sweep
                st.session_state[SHOWN] = sweep.study_name
        for name, reason in st.session_state.get(ERRORS, {}).items():
            st.error(f"**{name}**: {reason}", icon="⚠️")


def _optimizers() -> list[str]:
    from core import optimizers

    return [spec.name for spec in optimizers.specs()]


def open_sweep(name: str) -> Sweep | None:
    if name not in state.sweeps():
        try:
            state.sweeps()[name] = Sweep.load(engine, name)
        except InvalidHyperparameters as exc:
            st.warning(str(exc))
            return None
    return state.sweeps()[name]


new_sweep_form()
studies = list_studies(engine)
if not studies:
    st.info("No sweeps yet.")
    st.stop()
names = [s.study_name for s in studies]
shown = st.session_state.get(SHOWN)
chosen = st.selectbox(
    "Sweep",
    names,
    index=names.index(shown) if shown in names else 0,
    key="sweep:chosen",
    format_func=lambda n: next(
        f"{n} · {s.trials} trials · best {format.number(s.best_value)}"
        for s in studies
        if s.study_name == n
    ),
)
sweep = open_sweep(chosen)
if sweep is None:
    st.stop()


@st.fragment(run_every=state.refresh_interval(sweep.status().active))
def sweep_view(sweep: Sweep, was_active: bool) -> None:
    status = sweep.status()
    st.progress(
        status.progress,
        text=f"{status.state} · {status.finished}/{status.n_trials} "
        f"trials · {status.running} training · best {format.number(status.best_value)}",
    )
    if status.error:
        st.error(status.error)
    rows = sweep.results()
    st.dataframe(
        [
            {
                "trial": r.number,
                "state": r.state,
                "value": r.value,
                **r.params,
                "run": r.run_id,
                "run status": r.run_status,
                "step": r.step,
            }
            for r in rows
        ],
        hide_index=True,
    )
    scored = [
        {
            **{k: float(v) for k, v in r.params.items() if isinstance(v, int | float)},
            "val_accuracy": r.value,
        }
        for r in rows
        if r.value is not None
    ]
    if scored:
        st.plotly_chart(hyperparameter_figure(scored, "val_accuracy"), key="chart:sweep")
    stop, best, watch = st.columns(3)
    if status.active:
        stop.button("⏹ Stop the sweep", on_click=sweep.stop, width="stretch")
    if status.best_run_id:
        if best.button("⧉ Open the best in Train", width="stretch"):
            state.open_page("pages/1_Train.py", **{state.PREFILL: sweep.best_config().to_dict()})
        running = [r.run_id for r in rows if r.run_id and r.state == "RUNNING"]
        if watch.button("📈 Watch its runs", width="stretch"):
            state.open_page("pages/2_Live.py", **{state.WATCH: running or [status.best_run_id]})
    if was_active and not status.active:
        st.rerun()


sweep_view(sweep, sweep.status().active)
