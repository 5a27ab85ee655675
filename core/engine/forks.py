"""Forks: a new run that starts from a checkpoint of another, with knobs or run fields
changed. The counterfactual "the same run from step 300, with the learning rate halved".

A fork starts from its own copy of the parent's checkpoint, so it resumes exactly as a
stopped run does (see `core.engine.execution`) and outlives its parent. Its config is the
parent's with the knob values the parent had at that step (live changes included) and
the changes asked for; the execution makes the knob changes as live changes at its first
step, so that its charts mark them where the branch begins. What a checkpoint holds cannot
change in a fork (the model, the optimizer, which knobs are on, the data, the
instruments): clone the run for that.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.engine.checkpoints import RunCheckpoints
from core.knobs import InvalidInput, live_change
from core.store import KNOB_EVENT, Store, UnknownRunError
from core.training.config import RunConfig

# The run fields a fork may change: none of them is part of the checkpoint.
FORK_FIELDS = (
    "name",
    "max_steps",
    "epochs",
    "log_every",
    "per_layer_every",
    "val_every",
    "checkpoint_every",
)


def fork_config(store: Store, run_id: str, step: int, changes: Mapping[str, Any]) -> RunConfig:
    """The config of a fork of `run_id` from its checkpoint of `step` with `changes`
    (knobs and `FORK_FIELDS`).

    Raises `InvalidInput` naming every field it cannot take (`step` for a checkpoint
    that does not exist), and `UnknownRunError` for an unknown run.
    """
    from core import optimizers

    record = store.get_run(run_id)
    if record is None:
        raise UnknownRunError(run_id)
    errors: dict[str, str] = {}
    saved = [c.step for c in RunCheckpoints(store.checkpoint_folder(run_id)).list()]
    if step not in saved:
        listed = ", ".join(map(str, saved)) or "none"
        errors["step"] = f"run {run_id} has no checkpoint of step {step} (saved: {listed})"
    parent = RunConfig.from_dict(record.config)
    spec = optimizers.get_spec(parent.optimizer)
    values = parent.to_dict()
    knobs = dict(values["hyperparameters"])  # as they were at `step`, live changes included
    for event in store.events(run_id, KNOB_EVENT):
        if event.step <= step:
            knobs[event.payload["name"]] = event.payload["value"]
    live = {knob.name for knob in spec.knobs if knob.live}
    fields: dict[str, Any] = {}
    knob_changes: dict[str, float] = {}
    for name, value in changes.items():
        if name in FORK_FIELDS:
            fields[name] = value
        elif name in live and knobs.get(name) is not None:
            try:
                knob_changes[name] = live_change(spec.knobs, name, value, was_on=True)
            except ValueError as exc:
                errors[name] = str(exc)
        elif name in live:
            errors[name] = "is off in the run forked, and a fork cannot turn it on: clone the run"
        else:
            errors[name] = (
                f"a fork changes only the live knobs that are on and {', '.join(FORK_FIELDS)}: "
                "clone the run to change it"
            )
    max_steps = fields.get("max_steps")
    if isinstance(max_steps, int) and max_steps <= step:  # other values: RunConfig says
        errors["max_steps"] = f"must be more than the step the fork starts after ({step})"
    if errors:
        raise InvalidInput(errors)
    return RunConfig.from_dict(
        {
            **values,
            **fields,
            "name": fields.get("name") or f"{parent.label} · fork@{step}",
            "group": None,  # a branch of one of the repeats is not one more of them
            "hyperparameters": {**knobs, **knob_changes},
        }
    )


def create_fork(
    store: Store,
    run_id: str,
    step: int,
    changes: Mapping[str, Any],
    *,
    owner: str,
    command: str | None = None,
) -> str:
    """Stores a queued fork of `run_id` from step `step` (see `fork_config`) for the
    engine `owner`, with a copy of the checkpoint; returns its id.

    Args:
        store: Where the parent is, and the fork goes.
        run_id: The parent run.
        step: The step of the parent's checkpoint the fork starts from.
        changes: Live knobs and `FORK_FIELDS` (`max_steps`, `name`, ...) that differ
            from the parent's at `step`.
        owner: The engine process that will train the fork (it is queued for it).
        command: A command for `owner` written with the fork ("start" when another
            process hands the fork over); None when `owner` queues it itself.
    """
    config = fork_config(store, run_id, step, changes)
    fork_id = store.new_run_id()
    RunCheckpoints(store.checkpoint_folder(run_id)).copy(step, store.checkpoint_folder(fork_id))
    store.create_run(
        fork_id,
        config.label,
        config.to_dict(),
        owner=owner,
        command=command,
        parent=run_id,
        forked_at=step,
    )
    return fork_id
