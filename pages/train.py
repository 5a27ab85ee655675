"""Train: configure a run from the optimizer specs and the run fields, then start it."""

from __future__ import annotations

import streamlit as st

from core import optimizers
from core.data import files
from core.engine import TASKS, run_fields
from core.engine.repeats import MAX_REPEATS
from core.engine.repeats import VARY as VARY_CHOICES
from core.escaping import escape_markdown
from core.store import UnknownRunError
from ui import forms, nav, range_test, roles, state, texts
from ui.train_form import (
    ERRORS,
    RANGE_TEST,
    REPEATS,
    STARTED,
    TRANSFORMER_RULES,
    UPLOAD,
    VARY,
    dataset_options,
    knob_key,
    privacy_fields,
    run_key,
    seed_knobs,
    seed_widgets,
    submit,
    take_suggested_rate,
    upload,
    use_rate,
    use_rules,
    weight_key,
)

st.title(":material/rocket_launch: Train")
roles.presenter_page("Train")
FIELDS = run_fields()  # read at each run: a plugin loaded since shows


seed_widgets(st.session_state.pop(state.PREFILL, None))
take_suggested_rate()
errors: dict[str, str] = st.session_state.get(ERRORS, {})

model_col, data_col, optimizer_col = st.columns(3)
with model_col:
    forms.field(FIELDS["model"], run_key("model"), errors)
    st.caption(texts.described("model", st.session_state[run_key("model")]))
with data_col:
    st.selectbox(
        "dataset",
        dataset_options(),
        key=run_key("dataset"),
        format_func=files.label,
        help=FIELDS["dataset"].help,
        persist_state=state.KEPT,
    )
    with st.popover("Your own data", icon=":material/upload_file:", key="train:own-data"):
        st.file_uploader(
            "A .npz (x_train, y_train, x_test, y_test) or a .csv (features, then the label)",
            type=list(files.FORMATS),
            key=UPLOAD,
            on_change=upload,
            help=f"Checked, then kept beside the lab's store; up to "
            f"{files.MAX_BYTES // 2**20} MB. Labels are classes 0, 1, 2, ...",
        )
    # After the popover: an error above it would move it, and close it.
    forms.show_error(errors, "dataset")
    data_dir = st.session_state.get(run_key("data_dir")) or None
    st.caption(texts.described("dataset", st.session_state[run_key("dataset")], data_dir))
with optimizer_col:
    forms.field(FIELDS["optimizer"], run_key("optimizer"), errors)

spec = optimizers.get_spec(st.session_state[run_key("optimizer")])
seed_knobs(spec)
# A plugin's name, summary and update rule come from the engine's row in the store: text,
# not Markdown.
st.caption(
    f"**{escape_markdown(spec.name)}**: {escape_markdown(spec.summary)}  \n"
    + escape_markdown(spec.update_rule)
)

st.subheader("Optimizer knobs")
knobs = [k for k in spec.knobs if k.type != "rules"]
columns = st.columns(3)
for i, knob in enumerate(knobs):
    with columns[i % 3]:
        forms.field(knob, knob_key(spec.name, knob.name), errors)
rules = next(k for k in spec.knobs if k.type == "rules")
with st.expander("Per-layer rules (step multiplier and weight decay by regex)"):
    st.caption(
        "Variable paths look like `conv1/kernel` or `logits/bias`; the first match "
        "wins. For example, heavier decay on the classifier alone: `logits`."
    )
    st.button(
        "Rules for a transformer",
        on_click=use_rules,
        args=(spec.name, TRANSFORMER_RULES),
        key="train:transformer-rules",
        help="No decay for norms and biases, a tenth of the step for the embeddings: "
        "for a transformer such as the tiny_vit plugin.",
    )
    forms.field(rules, knob_key(spec.name, rules.name), errors)

st.subheader("Run")
run_settings = [
    "batch_size",
    "epochs",
    "max_steps",
    "lr_schedule",
    "warmup_steps",
    "seed",
    "log_every",
    "val_every",
    "strategy",
    "precision",
    "name",
    "data_dir",
    # What a run asks of a Ray cluster, when the engine trains on one.
    *(("num_cpus", "num_gpus") if state.engine().cluster_info() is not None else ()),
]
columns = st.columns(3)
for i, name in enumerate(run_settings):
    with columns[i % 3]:
        forms.field(FIELDS[name], run_key(name), errors)
repeat_cols = st.columns(3)
repeat_cols[0].number_input(
    "repeats",
    min_value=1,
    max_value=MAX_REPEATS,
    value=1,
    key=REPEATS,
    persist_state=state.KEPT,
    help="Train this config this many times, with seeds seed, seed+1, …, as one group: "
    "Compare then says how sure a difference between groups is.",
)
if st.session_state[REPEATS] > 1:
    repeat_cols[1].selectbox(
        "the seeds vary",
        VARY_CHOICES,
        key=VARY,
        persist_state=state.KEPT,
        help="both: the initial weights and the batch order; init or data: only one.",
    )
with st.expander(
    "Differential privacy (DP-SGD)",
    icon=":material/shield_lock:",
    expanded=bool(st.session_state.get(run_key("dp_clip"))),
):
    privacy_fields(FIELDS, errors)
toggle_cols = st.columns(3)
with toggle_cols[0]:
    forms.field(FIELDS["telemetry"], run_key("telemetry"), errors)
with toggle_cols[1]:
    forms.field(FIELDS["multitask"], run_key("multitask"), errors)
if st.session_state[run_key("multitask")]:
    with toggle_cols[2]:
        for task in TASKS:
            st.text_input(f"loss weight: {task}", key=weight_key(task), persist_state=state.KEPT)
        forms.show_error(errors, "task_weights")

other = {
    k: v
    for k, v in errors.items()
    if k not in FIELDS and k not in {knob.name for knob in spec.knobs} and k != "task_weights"
}
for name, reason in other.items():
    forms.error(name, reason)

start_col, find_col = st.columns([1, 3])
start_col.button(
    "Start training", icon=":material/play_arrow:", type="primary", on_click=submit, key="start"
)
find_col.button(
    "Find a learning rate",
    icon=":material/query_stats:",
    on_click=submit,
    args=(True,),
    key="lr_find",
    help="A learning-rate range test of this config: about 200 steps whose rate grows "
    "from 1e-7 to 10 (the form's learning rate aside) until the loss explodes; then the "
    "loss against the rate, and a suggested rate to use.",
)
if errors:
    st.warning(f"Nothing started: {len(errors)} field(s) need a fix.", icon=":material/warning:")
if run_ids := st.session_state.pop(STARTED, None):
    state.open_page(nav.LIVE.file, **{state.WATCH: run_ids})
try:
    test = state.engine().status(test_id) if (test_id := st.session_state.get(RANGE_TEST)) else None
except UnknownRunError:  # deleted since
    test = st.session_state[RANGE_TEST] = None
if test is not None:
    with st.container(border=True):
        st.fragment(range_test.panel, run_every=state.refresh_interval(test.active))(
            state.engine(),
            test.id,
            test.active,
            lambda rate: use_rate(test.config["optimizer"], rate),
        )
