"""What a run can change while it trains, checked in one place for the engine, its
clients (the dashboard, the CLI) and the run's own process.

A run's live knobs are its optimizer's live knobs, and, for a multi-task run, the loss
weight of each task, the knob `task_weight/<task>` (`task_weight`): a variable of the
traced step, as a live optimizer knob is, so that a change needs no retrace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from core.knobs import InvalidInput, Knob, live_change
from core.series import SeriesKey
from core.training.config import TASKS

#: A task's loss weight: a multi-task run's live knob `task_weight/<task>` for each task.
TASK_WEIGHT: Final = "task_weight"


def task_weight(task: str) -> str:
    """The name of the knob that weighs `task`'s loss: `task_weight/<task>`."""
    return SeriesKey(TASK_WEIGHT, task).format()


def weighted_task(knob: str) -> str | None:
    """The task whose loss weight the knob named `knob` is; None for an optimizer's."""
    key = SeriesKey.parse(knob)
    return key.of if key.statistic == TASK_WEIGHT else None


TASK_WEIGHT_KNOBS: Final = tuple(
    Knob(
        task_weight(task),
        "float",
        1.0,
        f"Loss weight of the {task} task of a multi-task run.",
        low=0.0,
        high=1000.0,
        live=True,
    )
    for task in TASKS
)


def live_knobs(optimizer: str, multitask: bool) -> tuple[Knob, ...]:
    """The knobs a run of `optimizer` can change while it trains (the task weights too,
    if it is `multitask`). Raises `InvalidInput` naming `optimizer` if there is none such."""
    from core import optimizers

    own = tuple(knob for knob in optimizers.get_spec(optimizer).knobs if knob.live)
    return own + (TASK_WEIGHT_KNOBS if multitask else ())


def run_knobs(config: Mapping[str, Any]) -> dict[str, Any]:
    """A run's knobs as it started, by name, from its config (`RunConfig.to_dict()`): the
    optimizer's hyperparameters, and a multi-task run's task weights."""
    knobs = dict(config.get("hyperparameters") or {})
    if config.get("multitask"):
        weights = config.get("task_weights") or {}
        knobs |= {task_weight(task): weights.get(task, 1.0) for task in TASKS}
    return knobs


def checked_changes(
    config: Mapping[str, Any], now: Mapping[str, Any], changes: Mapping[str, Any]
) -> dict[str, Any]:
    """`changes` to a run of `config` whose knobs are `now`, validated: the values to set.
    Raises `InvalidInput` naming each knob it cannot change (or `knobs` for none)."""
    if not changes:
        raise InvalidInput({"knobs": "name at least one knob to change"})
    knobs = live_knobs(config["optimizer"], bool(config.get("multitask")))
    errors, values = {}, {}
    for name, value in changes.items():
        try:
            values[name] = live_change(knobs, name, value, was_on=now.get(name) is not None)
        except ValueError as exc:
            errors[name] = str(exc)
    weights = {k: v for k, v in ({**now, **values}).items() if weighted_task(k) is not None}
    if weights and not any(weights.values()) and not errors:
        errors["task_weights"] = "at least one weight must stay above 0"
    if errors:
        raise InvalidInput(errors)
    return values
