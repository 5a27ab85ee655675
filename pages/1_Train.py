"""Train: configure a run from the optimizer specs and the run fields, then start it."""

from __future__ import annotations

from typing import Any

import streamlit as st

from core import optimizers
from core.engine import RunConfig, fields
from core.knobs import InvalidHyperparameters, Knob
from ui import forms, state

st.title(":material/rocket_launch: Train")

ERRORS = "train_errors"
STARTED = "train_started"
RUN_FIELDS = {f.name: f for f in fields()}


def run_key(name: str) -> str:
    return f"run:{name}"


def knob_key(optimizer: str, name: str) -> str:
    return f"knob:{optimizer}:{name}"


def seed_widgets(prefill: dict[str, Any] | None) -> None:
    """Widget values: a cloned config's when given, else the defaults (kept across reruns)."""
    if prefill:
        for name, knob in RUN_FIELDS.items():
            st.session_state[run_key(name)] = forms.initial(knob, prefill.get(name))
        for task, weight in prefill.get("task_weights", {}).items():
            st.session_state[run_key(f"weight_{task}")] = f"{weight:g}"
        spec = optimizers.get_spec(prefill["optimizer"])
        hyperparameters = prefill.get("hyperparameters", {})
        for knob in spec.knobs:
            if knob.name not in hyperparameters:
                continue
            key = knob_key(spec.name, knob.name)
            value = forms.initial(knob, hyperparameters[knob.name])
            if knob.type == "rules":
                st.session_state[f"{key}:data"] = value
                st.session_state.pop(key, None)  # the editor's edits of the old rows
            else:
                st.session_state[key] = value
    for name, knob in RUN_FIELDS.items():
        st.session_state.setdefault(run_key(name), forms.initial(knob, knob.default))
    for task in ("digit", "parity"):
        st.session_state.setdefault(run_key(f"weight_{task}"), "1")


def seed_knobs(spec: optimizers.OptimizerSpec) -> None:
    for knob in spec.knobs:
        key = knob_key(spec.name, knob.name)
        if knob.type == "rules":
            st.session_state.setdefault(f"{key}:data", forms.initial(knob, knob.default))
        else:
            st.session_state.setdefault(key, forms.initial(knob, knob.default))


def field(knob: Knob, key: str, errors: dict[str, str]) -> None:
    forms.widget(knob, key)
    forms.show_error(errors, knob.name)


def submit() -> None:
    """Validates the form; starts the run, or keeps every error for display."""
    errors: dict[str, str] = {}
    values: dict[str, Any] = {}
    for name, knob in RUN_FIELDS.items():
        try:
            values[name] = forms.parse(knob, forms.value(knob, run_key(name)))
        except ValueError as exc:
            errors[name] = str(exc)
    spec = optimizers.get_spec(values["optimizer"])
    hyperparameters = {}
    for knob in spec.knobs:
        if knob.name == "telemetry":
            continue
        try:
            hyperparameters[knob.name] = forms.parse(
                knob, forms.value(knob, knob_key(spec.name, knob.name))
            )
        except ValueError as exc:
            errors[knob.name] = str(exc)
    values["hyperparameters"] = hyperparameters
    weights = {}
    for task in ("digit", "parity"):
        try:
            weights[task] = float(st.session_state[run_key(f"weight_{task}")])
        except ValueError:
            errors["task_weights"] = f"{task}: must be a number"
    values["task_weights"] = weights
    # Validate what parsed (the rest at its default), so every error shows at once.
    hyperparameters = {k: v for k, v in hyperparameters.items() if k not in errors}
    checked = {k: v for k, v in values.items() if k not in errors}
    try:
        config = RunConfig.from_dict({**checked, "hyperparameters": hyperparameters})
    except InvalidHyperparameters as exc:
        errors = exc.errors | errors
    st.session_state[ERRORS] = errors
    if not errors:
        run_id = state.engine().start(config)
        st.session_state[STARTED] = run_id


seed_widgets(st.session_state.pop(state.PREFILL, None))
errors: dict[str, str] = st.session_state.get(ERRORS, {})

model_col, data_col, optimizer_col = st.columns(3)
with model_col:
    field(RUN_FIELDS["model"], run_key("model"), errors)
with data_col:
    field(RUN_FIELDS["dataset"], run_key("dataset"), errors)
with optimizer_col:
    field(RUN_FIELDS["optimizer"], run_key("optimizer"), errors)

spec = optimizers.get_spec(st.session_state[run_key("optimizer")])
seed_knobs(spec)
st.caption(f"**{spec.name}**: {spec.summary}  \n`{spec.update_rule}`")

st.subheader("Optimizer knobs")
knobs = [k for k in spec.knobs if k.name != "telemetry" and k.type != "rules"]
columns = st.columns(3)
for i, knob in enumerate(knobs):
    with columns[i % 3]:
        field(knob, knob_key(spec.name, knob.name), errors)
rules = next(k for k in spec.knobs if k.type == "rules")
with st.expander("Per-layer rules (step multiplier and weight decay by regex)"):
    st.caption(
        "Variable paths look like `conv1/kernel` or `logits/bias`; the first match "
        "wins. The article's example: heavier decay on the classifier, `logits`."
    )
    field(rules, knob_key(spec.name, rules.name), errors)

st.subheader("Run")
run_fields = [
    "batch_size",
    "epochs",
    "max_steps",
    "seed",
    "log_every",
    "val_every",
    "strategy",
    "name",
    "data_dir",
]
columns = st.columns(3)
for i, name in enumerate(run_fields):
    with columns[i % 3]:
        field(RUN_FIELDS[name], run_key(name), errors)
toggle_cols = st.columns(3)
with toggle_cols[0]:
    field(RUN_FIELDS["telemetry"], run_key("telemetry"), errors)
with toggle_cols[1]:
    field(RUN_FIELDS["multitask"], run_key("multitask"), errors)
if st.session_state[run_key("multitask")]:
    with toggle_cols[2]:
        st.text_input("loss weight: digit", key=run_key("weight_digit"))
        st.text_input("loss weight: parity", key=run_key("weight_parity"))
        forms.show_error(errors, "task_weights")

other = {
    k: v
    for k, v in errors.items()
    if k not in RUN_FIELDS and k not in {knob.name for knob in spec.knobs} and k != "task_weights"
}
for name, reason in other.items():
    forms.error(name, reason)

st.button(
    "Start training", icon=":material/play_arrow:", type="primary", on_click=submit, key="start"
)
if errors:
    st.warning(f"Nothing started: {len(errors)} field(s) need a fix.", icon=":material/warning:")
if run_id := st.session_state.pop(STARTED, None):
    state.open_page("pages/2_Live.py", **{state.WATCH: [run_id]})
