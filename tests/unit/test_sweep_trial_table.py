"""The lines `optlab sweep` prints: a trial's row once its run starts, with its values
(never a RUNNING row of blanks), and what a trial's value is, said before the table."""

from __future__ import annotations

import io

from core.cli.sweeping import TrialTable
from core.sweep import Dimension, TrialRow
from core.sweep.objective import objective_for

RATE = Dimension("learning_rate", 1e-3, 1e-1, log=True)


def row(
    number: int, state: str, params: dict, run_id: str | None, value: float | None = None
) -> TrialRow:
    return TrialRow(number, state, params, value, run_id, None, None, None, None)


def test_a_trial_is_printed_once_its_run_starts_with_its_values() -> None:
    out = io.StringIO()
    table = TrialTable([RATE], out)
    # Asked for: RUNNING before its values are drawn and its run started; a resumed
    # sweep's retry, enqueued, WAITING without them.
    table.update(
        [row(0, "RUNNING", {}, None), row(1, "RUNNING", {}, None), row(2, "WAITING", {}, None)]
    )
    assert out.getvalue().splitlines()[1:] == []
    table.update([row(0, "RUNNING", {"learning_rate": 0.01}, "run-a"), row(1, "RUNNING", {}, None)])
    table.update([row(0, "COMPLETE", {"learning_rate": 0.01}, "run-a", 0.9)])
    lines = [line.split() for line in out.getvalue().splitlines()]
    assert lines == [
        ["trial", "state", "value", "learning_rate", "run"],
        ["0", "RUNNING", "0.01", "run-a"],
        ["0", "COMPLETE", "0.9000", "0.01", "run-a"],
    ]


def test_a_trials_value_is_said_to_be_the_best_over_its_validations() -> None:
    accuracy = objective_for(None, "classification")
    assert accuracy.value_text() == (
        "the best val_accuracy its run validated at, not the last (maximized); "
        "a pruned trial's, its last reported one"
    )
    seeds = objective_for("val_loss", "classification").value_text(3)
    assert seeds.startswith(
        "the mean over its 3 runs (seeds) of the best val_loss each run validated at, "
        "not the last (minimized)"
    )
    steps = objective_for("time_to_target", "regression", 0.5).value_text()
    assert steps.startswith(
        "the first step at which its run validated at val_mae ≤ 0.5 (minimized)"
    )
