"""A run's knob schedule: live knob changes planned before it starts, each at its step.

The run field `knob_schedule` is a list of `{"step": S, "knobs": {name: value}}`, steps
rising: at step S the run sets those knobs before S's update, exactly as a live change
sent at that moment would be set, and records each as a knob event at S (marked on its
charts). It is how a schedule found by population-based training is replayed as one
plain run from scratch (`optlab train --schedule-from RUN`). A run resumed from a
checkpoint holds the changes made up to it (knob values are part of a checkpoint) and
makes the later ones; a fork keeps its parent's schedule, so its later entries apply in
the fork too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.knobs import Knob, live_change

#: A schedule, checked: steps rising, each step's changed knobs with their values.
KnobSchedule = list[dict[str, Any]]


def checked_schedule(
    entries: Any, knobs: tuple[Knob, ...], start: Mapping[str, Any]
) -> tuple[KnobSchedule, str | None]:
    """`entries` checked against the optimizer's `knobs`, of which the run starts with the
    values `start`: the schedule, and None; or an empty one and the reason it is refused
    (the first entry at fault, by its position, and why)."""
    if entries is None:
        return [], None
    if not isinstance(entries, list | tuple):
        return [], f'must be a list of {{"step": S, "knobs": {{name: value}}}} (got {entries!r})'
    schedule: KnobSchedule = []
    previous = 0
    for position, entry in enumerate(entries):
        where = f"entry {position + 1}"
        if not isinstance(entry, Mapping) or set(entry) != {"step", "knobs"}:
            return [], f'{where} must be {{"step": S, "knobs": {{name: value}}}} (got {entry!r})'
        step, changes = entry["step"], entry["knobs"]
        if not isinstance(step, int) or isinstance(step, bool) or step <= previous:
            return [], f"{where}'s step must be a whole number above {previous} (got {step!r})"
        if not isinstance(changes, Mapping) or not changes:
            return [], f"{where} must change at least one knob (got {changes!r})"
        values = {}
        for name, value in changes.items():
            try:
                values[name] = live_change(knobs, name, value, was_on=start.get(name) is not None)
            except ValueError as exc:
                return [], f"{where}: {name} {exc}"
        schedule.append({"step": step, "knobs": values})
        previous = step
    return schedule, None


def changes_at(schedule: KnobSchedule) -> dict[int, dict[str, Any]]:
    """The schedule by step: what a run sets before each step's update."""
    return {entry["step"]: dict(entry["knobs"]) for entry in schedule}
