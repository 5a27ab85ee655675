"""The form inputs' arithmetic (issue 39): a table's edits folded into its rows, a knob
picked in the Sweep page's search space filling in its range, a live knob's number field
step, and a run card's progress line."""

from __future__ import annotations

import functools
import time

import pytest

from core.engine import RunStatus
from ui import forms, live_panel, sweep_form, texts

ROWS = [{"name": "learning_rate", "low": 0.001, "high": 0.1, "log": True, "points": 3}]


def test_a_tables_edits_are_folded_into_its_rows() -> None:
    edits = {
        "edited_rows": {0: {"high": 0.5}, 7: {"low": 1.0}},  # row 7: gone since; dropped
        "added_rows": [{"name": "batch_size"}, {"name": "seed"}],
        "deleted_rows": [2],
    }
    assert forms.edited_rows(ROWS, edits) == [{**ROWS[0], "high": 0.5}, {"name": "batch_size"}]
    assert forms.edited_rows(ROWS, None) == ROWS


def test_picking_a_knob_fills_in_its_range_or_its_choices() -> None:
    fill = functools.partial(sweep_form.with_range, "momentum")
    edits = {
        "edited_rows": {0: {"name": "momentum"}},
        "added_rows": [{"name": "nesterov"}, {"name": "batch_size", "high": 256}],
    }
    picked, nesterov, batch = forms.edited_rows(ROWS, edits, fill)
    # The learning rate's range and choices gave way to the knob's; its grid points stay.
    assert picked == {
        "name": "momentum",
        "low": 0.45,
        "high": 0.95,
        "log": False,
        "points": 3,
        "choices": "",
    }
    assert nesterov["choices"] == "False, True" and nesterov["low"] is None
    assert (batch["low"], batch["high"], batch["points"]) == (32, 256, 5)  # what was typed wins
    # An edit that picks no knob leaves the row as edited.
    assert forms.edited_rows(ROWS, {"edited_rows": {0: {"low": 0.01}}}, fill) == [
        {**ROWS[0], "low": 0.01}
    ]


@pytest.mark.parametrize(("value", "step"), [(0.01, 0.001), (20.0, 1.0), (4e-3, 1e-4), (0, 1e-3)])
def test_a_knobs_number_field_steps_by_a_tenth_of_its_decade(value: float, step: float) -> None:
    assert live_panel.field_step(value) == pytest.approx(step)


def a_run(status: str) -> RunStatus:
    now = time.time()
    return RunStatus(
        id="r1",
        name="r",
        status=status,
        config={},
        step=50,
        total_steps=200,
        created=now,
        started=now,
        finished=None,
        error=None,
        final_metrics=None,
        steps_per_second=25.0,
    )


def test_a_run_card_shows_speed_and_eta_only_while_it_trains() -> None:
    assert texts.progress(a_run("running")) == "step 50/200 · 25.0 steps/s · ETA 6s"
    for status in ("paused", "queued", "completed", "stopped"):
        assert texts.progress(a_run(status)) == "step 50/200", status
