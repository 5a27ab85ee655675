"""The forms' inputs under AppTest (issue 39): a live knob's slider and number field hold
one value and send nothing until Apply; a paused run's card promises no end; the Train
and Sweep forms keep what was typed when the user leaves the page and comes back. The
Sweep form's run fields take their defaults and ranges from `FIELDS` (issue 40)."""

from __future__ import annotations

import re
from typing import Any

from streamlit.testing.v1 import AppTest

from core.engine import RunConfig, run_fields
from core.knobs import InvalidInput, Knob
from core.sweep import list_studies
from tests.apptest import SHORT, page
from tests.waiting import wait_for
from ui import nav


def test_a_knobs_slider_and_field_are_one_value_sent_only_by_apply(lab) -> None:
    run_id = lab.start(RunConfig.from_dict({**SHORT, "max_steps": None, "epochs": 10_000}))
    at = page(nav.LIVE)
    at.session_state["watch"] = [run_id]
    at.run()
    slider, field = f"knob:{run_id}:radius:20.0", f"knob-field:{run_id}:radius:20.0"
    assert at.select_slider(key=slider).value == 20.0 and at.number_input(key=field).value == 20.0
    # A value between the slider's 1-2-5 steps, typed: the slider takes it, as an option.
    at.number_input(key=field).set_value(13.7).run()
    assert at.select_slider(key=slider).value == 13.7
    assert "13.7" in at.select_slider(key=slider).options
    # Slid back to a step: the field follows.
    at.select_slider(key=slider).set_value(10.0).run()
    assert at.number_input(key=field).value == 10.0
    # Outside the knob's range (0, 1e+06]: refused, and the field shows the slider's value.
    at.number_input(key=field).set_value(-1.0).run()
    assert at.number_input(key=field).value == 10.0 and at.select_slider(key=slider).value == 10.0
    assert any("radius: must be in (0, 1e+06]" in toast.value for toast in at.toast)
    at.number_input(key=field).set_value(13.7).run()
    at.run().run()  # refreshes, with the value moved but not applied
    assert not [e for e in lab.events(run_id) if e.kind == "knob"]
    at.button(key=f"apply:{run_id}").click().run()
    wait_for(
        lambda: [e for e in lab.events(run_id) if e.kind == "knob"],
        timeout=30,
        what="the typed value to reach the run",
    )
    (change,) = [e.payload for e in lab.events(run_id) if e.kind == "knob"]
    assert change == {"name": "radius", "value": 13.7, "previous": 20.0}

    # Paused, its card shows neither speed nor ETA (issue 39); training, it does.
    wait_for(lambda: lab.status(run_id).steps_per_second, timeout=60, what="a speed")
    at.run()
    assert "steps/s" in at.get("progress")[0].text
    lab.settle(lab.pause(run_id))
    wait_for(lambda: lab.status(run_id).status == "paused", timeout=30, what="the pause")
    at.run()
    (bar,) = at.get("progress")
    assert bar.text.startswith("step ") and "steps/s" not in bar.text and "ETA" not in bar.text
    lab.settle(lab.stop(run_id))


def test_the_train_form_is_kept_when_the_user_leaves_the_page(lab) -> None:
    at = page(nav.TRAIN).run()
    at.selectbox(key="run:optimizer").select("adamw").run()
    at.text_input(key="knob:adamw:learning_rate").input("0.003").run()
    at.text_input(key="run:batch_size").input("32").run()
    at.selectbox(key="run:dataset").select("digits").run()
    at.toggle(key="run:telemetry").set_value(False).run()
    at.number_input(key="train:repeats").set_value(3).run()
    at.selectbox(key="train:vary").select("init").run()
    at.button(key="train:transformer-rules").click().run()
    at.switch_page(nav.COMPARE.file).run()
    assert not at.exception
    at.switch_page(nav.TRAIN.file).run()
    assert not at.exception and not at.warning
    assert at.selectbox(key="run:optimizer").value == "adamw"
    assert at.text_input(key="knob:adamw:learning_rate").value == "0.003"
    assert at.text_input(key="run:batch_size").value == "32"
    assert at.selectbox(key="run:dataset").value == "digits"
    assert at.toggle(key="run:telemetry").value is False
    assert at.number_input(key="train:repeats").value == 3
    assert at.selectbox(key="train:vary").value == "init"
    (rules,) = at.data_editor
    assert rules.value["pattern"].tolist() == ["norm|bias", "embedding"]


def test_the_sweep_form_is_kept_when_the_user_leaves_the_page(lab) -> None:
    at = page(nav.SWEEP).run()
    at.selectbox(key="sweep:optimizer").select("momentum").run()
    at.text_input(key="sweep:epochs").input("2").run()
    at.radio(key="sweep:sampler").set_value("grid").run()
    at.number_input(key="sweep:n_trials").set_value(5).run()
    at.number_input(key="sweep:parallel").set_value(3).run()
    at.number_input(key="sweep:seed").set_value(42).run()
    at.toggle(key="sweep:pruning").set_value(False).run()
    at.switch_page(nav.COMPARE.file).run()
    at.switch_page(nav.SWEEP.file).run()
    assert not at.exception and not at.warning
    assert at.selectbox(key="sweep:optimizer").value == "momentum"
    assert at.text_input(key="sweep:epochs").value == "2"
    assert at.radio(key="sweep:sampler").value == "grid"
    assert at.number_input(key="sweep:n_trials").value == 5
    assert at.number_input(key="sweep:parallel").value == 3
    assert at.number_input(key="sweep:seed").value == 42
    assert at.toggle(key="sweep:pruning").value is False
    (space,) = at.data_editor  # momentum's, as the form starts it
    assert space.value["name"].tolist() == ["learning_rate"]


def form_fields(at: AppTest) -> dict[str, Any]:
    """The Sweep form's widgets of run fields, by field: those keyed `sweep:NAME`, but
    `sweep:seed`, the sampler's seed (a trial's runs take theirs from the sweep)."""
    fields = run_fields()
    widgets = [*at.text_input, *at.number_input, *at.selectbox, *at.toggle, *at.checkbox]
    keyed = {w.key.removeprefix("sweep:"): w for w in widgets if w.key.startswith("sweep:")}
    return {name: w for name, w in keyed.items() if name in fields and name != "seed"}


def shown_errors(at: AppTest) -> dict[str, str]:
    """The refusals the page shows, `**NAME**: reason`, by name, Markdown escapes undone."""
    shown = (re.fullmatch(r"\*\*(.+?)\*\*: (.*)", e.value, re.S) for e in at.error)
    return {m[1].replace("\\", ""): m[2].replace("\\", "") for m in shown if m}


def fields_errors(values: dict[str, Any]) -> dict[str, str]:
    """What `RunConfig` itself says of `values` (the others at their defaults)."""
    try:
        RunConfig.from_dict(values)
    except InvalidInput as exc:
        return exc.errors
    return {}


def test_the_sweep_forms_run_fields_take_their_defaults_and_ranges_from_FIELDS(lab) -> None:
    """Every run field the Sweep form shows starts at its `FIELDS` default and takes what
    `FIELDS` takes, no more and no less: typed just outside its range, and at its ends,
    it is refused (or not) as `RunConfig` refuses the same values."""
    at = page(nav.SWEEP).run()
    fields = run_fields()
    widgets = form_fields(at)
    # The fields the issue found at odds with FIELDS are among those shown.
    assert {"epochs", "val_every", "log_every"} <= set(widgets)
    numbers: dict[str, Knob] = {}
    for name, widget in widgets.items():
        knob = fields[name]
        if widget.type == "selectbox":
            assert (widget.value, widget.options) == (knob.default, list(knob.choices)), name
        elif widget.type == "toggle":
            assert widget.value is knob.default, name
        elif widget.type == "number_input":  # bounded by the widget: by the knob's range
            assert (widget.min, widget.max) == (knob.low, knob.high), name
            assert widget.value == knob.default, name
        else:  # typed text, which `RunConfig` checks: empty for none, else the default
            assert knob.type in {"int", "float"}, name
            assert widget.value == ("" if knob.default is None else f"{knob.default:g}"), name
            assert f"Valid: {knob.range_text()}." in widget.help.replace("\\", ""), name
            numbers[name] = knob
    assert {"epochs", "val_every", "log_every"} <= set(numbers)

    # A search space the sweep refuses: whatever the run fields say, nothing starts.
    at.session_state["sweep:dimensions:adamw"] = {
        "edited_rows": {0: {"low": -1.0}},
        "added_rows": [],
        "deleted_rows": [],
    }
    for typed in (
        {name: int(knob.low) - 1 for name, knob in numbers.items()},
        {name: int(knob.low) for name, knob in numbers.items()},
        {name: int(knob.high) for name, knob in numbers.items()},
        {name: int(knob.high) + 1 for name, knob in numbers.items()},
    ):
        for name, value in typed.items():
            at.text_input(key=f"sweep:{name}").input(str(value))
        at.button(key="sweep:start").click().run()
        assert not at.exception
        shown = {name: reason for name, reason in shown_errors(at).items() if name in fields}
        assert shown == fields_errors(typed), typed
    assert fields_errors({name: int(knob.high) + 1 for name, knob in numbers.items()})
    assert lab.list() == [] and list_studies(lab) == []
