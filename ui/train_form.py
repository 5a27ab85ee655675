"""The Train form's state: its widgets' keys and values, and the run config they give.

The page (`ui.nav.TRAIN`) draws the widgets; this module seeds them (defaults, or a
cloned run's config) and turns what was typed into a started run, or into an error per
field for the page to show.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import streamlit as st

from core import optimizers
from core.data import files, tfds_source
from core.engine import TASKS, RunConfig, run_fields
from core.engine.lr_find import range_test_config
from core.engine.repeats import repeat_configs
from core.escaping import escape_markdown
from core.knobs import InvalidInput, Knob
from core.training.config import warnings as config_warnings
from ui import forms, state

ERRORS = "train_errors"
STARTED = "train_started"  # the ids of the runs just started
REPEATS = "train:repeats"
VARY = "train:vary"
UPLOAD = "train_upload"
RANGE_TEST = "train_lr_find"  # the range test started from the form
SUGGESTED = "train_suggested_rate"  # (optimizer, rate) that "Use this rate" hands over


def run_key(name: str) -> str:
    """Session-state keys of the form's widgets: a run field's, a knob's, a task weight's."""
    return f"run:{name}"


def knob_key(optimizer: str, name: str) -> str:
    return f"knob:{optimizer}:{name}"


def weight_key(task: str) -> str:
    return run_key(f"weight_{task}")


def seed_widgets(prefill: dict[str, Any] | None) -> None:
    """Widget values: a cloned config's when given, else the defaults (kept across reruns)."""
    if prefill:
        for name, knob in run_fields().items():
            st.session_state[run_key(name)] = forms.initial(knob, prefill.get(name))
        for task, weight in prefill.get("task_weights", {}).items():
            st.session_state[weight_key(task)] = f"{weight:g}"
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
    for name, knob in run_fields().items():
        forms.seed(knob, run_key(name))
    for task in TASKS:
        st.session_state.setdefault(weight_key(task), "1")


def seed_knobs(spec: optimizers.OptimizerSpec) -> None:
    """Widget values for `spec`'s knobs: their defaults, unless set already."""
    for knob in spec.knobs:
        forms.seed(knob, knob_key(spec.name, knob.name))


#: The seeds' per-layer decay example, for a transformer (the ViT plugin): no decay on
#: norms and biases, a tenth of the step for the embeddings.
TRANSFORMER_RULES = (
    {"pattern": "norm|bias", "lr_mult": 1.0, "weight_decay": 0.0},
    {"pattern": "embedding", "lr_mult": 0.1},
)


def use_rules(optimizer: str, rules: tuple[dict[str, Any], ...]) -> None:
    """A button's callback: the per-layer rules editor of `optimizer` holds `rules`."""
    key = knob_key(optimizer, "layer_rules")
    st.session_state[f"{key}:data"] = [dict(rule) for rule in rules]
    st.session_state.pop(key, None)  # the editor's edits of the old rows


def dataset_options() -> list[str]:
    """The datasets to pick from: the lab's, the files uploaded to this store, the TFDS
    datasets prepared in the data dir, and a cloned run's file or TFDS dataset."""
    data_dir = st.session_state.get(run_key("data_dir")) or None
    names = [
        *run_fields()["dataset"].choices,
        *files.kept(state.engine().datasets_folder),
        *tfds_source.prepared_names(tfds_source.data_root(data_dir)),
    ]
    current = st.session_state.get(run_key("dataset"))
    own = files.is_file(current) or tfds_source.is_tfds(current)
    return [*names, current] if own and current not in names else names


def upload() -> None:
    """The uploader's callback: keeps a file that is a dataset, and picks it; else says
    why, under the dataset field."""
    uploaded = st.session_state.get(UPLOAD)
    if uploaded is None:
        return
    errors = {k: v for k, v in st.session_state.get(ERRORS, {}).items() if k != "dataset"}
    folder = state.engine().datasets_folder
    try:
        st.session_state[run_key("dataset")] = files.keep(
            folder, uploaded.name, uploaded.getvalue()
        )
    except files.BadDataFile as exc:
        errors["dataset"] = str(exc).removeprefix("dataset: ")
    st.session_state[ERRORS] = errors


def use_rate(optimizer: str, rate: float) -> None:
    """Hands `rate` over to the form, for `take_suggested_rate` on the next run of the
    page (a widget's value cannot change once it is drawn), and reruns it."""
    st.session_state[SUGGESTED] = (optimizer, rate)
    st.rerun()


def take_suggested_rate() -> None:
    """Puts a rate that "Use this rate" handed over into the learning_rate field of its
    optimizer, and picks that optimizer; before the widgets are drawn."""
    handed = st.session_state.pop(SUGGESTED, None)
    if handed is None:
        return
    optimizer, rate = handed
    knob = next(k for k in optimizers.get_spec(optimizer).knobs if k.name == "learning_rate")
    st.session_state[run_key("optimizer")] = optimizer
    st.session_state[knob_key(optimizer, knob.name)] = forms.initial(knob, float(f"{rate:.3g}"))


#: DP-SGD's run fields, in the order the form shows them.
PRIVACY = ("dp_clip", "dp_noise", "dp_delta", "dp_epsilon_budget", "dp_accountant")


def privacy_fields(fields: Mapping[str, Knob], errors: Mapping[str, str]) -> None:
    """DP-SGD's fields, three a row, and what the run would be warned of (a δ of at least
    1/n) as they stand."""
    st.caption(
        "Clip each example's gradient to dp_clip, add Gaussian noise of dp_noise × dp_clip "
        "to their sum, and count the privacy spent: ε at dp_delta, live on Live as "
        "dp_epsilon. Set dp_clip to turn it on."
    )
    columns = st.columns(3)
    for i, name in enumerate(PRIVACY):
        with columns[i % 3]:
            forms.field(fields[name], run_key(name), errors)
    shown = ("dataset", "data_dir", *PRIVACY)
    values, unread = forms.parsed([fields[name] for name in shown], run_key)
    try:
        said = [] if unread else config_warnings(RunConfig.from_dict(values))
    except InvalidInput:  # a field's error shows under it
        said = []
    for warning in said:
        st.warning(escape_markdown(warning), icon=":material/warning:")


def submit(range_test: bool = False) -> None:
    """Validates the form; starts the run (a learning-rate range test of its config if
    `range_test`), or keeps every error for display, the engine's refusal's too."""
    values, errors = forms.parsed(run_fields().values(), run_key)
    values["group"] = None  # a clone of a repeat is not one more of its group
    spec = optimizers.get_spec(values["optimizer"])
    hyperparameters, knob_errors = forms.parsed(spec.knobs, functools.partial(knob_key, spec.name))
    errors |= knob_errors
    values["hyperparameters"] = hyperparameters
    weights = {}
    for task in TASKS:
        try:
            weights[task] = float(st.session_state[weight_key(task)])
        except ValueError:
            errors["task_weights"] = f"{task}: must be a number"
    values["task_weights"] = weights
    # Validate what parsed (the rest at its default), so every error shows at once.
    hyperparameters = {k: v for k, v in hyperparameters.items() if k not in errors}
    checked = {k: v for k, v in values.items() if k not in errors}
    try:
        config = RunConfig.from_dict({**checked, "hyperparameters": hyperparameters})
    except InvalidInput as exc:
        errors = exc.errors | errors
    if not errors and not range_test:
        try:
            configs = repeat_configs(
                config, int(st.session_state.get(REPEATS, 1)), st.session_state.get(VARY, "both")
            )
        except InvalidInput as exc:
            errors = exc.errors
    st.session_state[ERRORS] = errors
    if errors:
        return
    engine = state.engine()
    try:
        if range_test:
            st.session_state[RANGE_TEST] = engine.start(range_test_config(config))
        else:
            st.session_state[STARTED] = engine.start_all(configs)
    except InvalidInput as exc:  # the engine's refusal: what it may not read, or cannot fit
        st.session_state[ERRORS] = exc.errors
