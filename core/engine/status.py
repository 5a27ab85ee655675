"""`RunStatus`: a run as every reader sees it, in-process engine and store clients alike."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from core.store import ACTIVE_STATUSES, RESUMABLE_STATUSES, RunRecord
from core.training.live import run_knobs


class Progress(NamedTuple):
    """A live run's progress, as the engine's control of it says."""

    status: str
    step: int
    steps_per_second: float | None


@dataclass(frozen=True)
class RunStatus:
    """A run as a caller sees it: the stored record, with live progress while it trains.

    `knobs` are the optimizer's knobs now: the config's, with every live change made
    while it trained. `steerable` says whether the process that runs it is alive to take
    commands (stop, pause, knob changes) through the store.
    """

    id: str
    name: str
    status: str
    config: dict[str, Any]
    step: int
    total_steps: int | None
    created: float
    started: float | None
    finished: float | None
    error: str | None
    final_metrics: dict[str, Any] | None
    steps_per_second: float | None = None
    tags: tuple[str, ...] = ()
    knobs: dict[str, Any] = field(default_factory=dict)
    steerable: bool = False
    parent: str | None = None  # a fork's parent run
    forked_at: int | None = None  # the parent's checkpoint step it started from
    node: str | None = None  # the machine (or Ray node) that trains it

    @classmethod
    def of(
        cls,
        record: RunRecord,
        live: Progress | None = None,
        changed: dict[str, Any] | None = None,
        *,
        steerable: bool = False,
    ) -> RunStatus:
        """The status of `record`, with `live` progress from its engine when known, and
        the knob values `changed` while it trained."""
        step, speed, status = record.step, record.speed, record.status
        if live is not None and record.status in ACTIVE_STATUSES:
            step = max(step, live.step)
            status = live.status if live.status in ACTIVE_STATUSES else status
            speed = live.steps_per_second
        elif record.final_metrics:
            speed = record.final_metrics.get("steps_per_second")
            step = record.final_metrics.get("steps", step)
        elif status not in ACTIVE_STATUSES:
            speed = None
        return cls(
            id=record.id,
            name=record.name,
            status=status,
            config=record.config,
            step=step,
            total_steps=record.total_steps,
            created=record.created,
            started=record.started,
            finished=record.finished,
            error=record.error,
            final_metrics=record.final_metrics,
            steps_per_second=speed,
            tags=record.tags,
            knobs={**run_knobs(record.config), **(changed or {})},
            steerable=steerable and status in ACTIVE_STATUSES,
            parent=record.parent,
            forked_at=record.forked_at,
            node=record.node,
        )

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_STATUSES

    @property
    def resumable(self) -> bool:
        """Whether it ended in a way it can be resumed from (with a checkpoint)."""
        return self.status in RESUMABLE_STATUSES

    @property
    def progress(self) -> float:
        return self.step / self.total_steps if self.total_steps else 0.0

    @property
    def eta_seconds(self) -> float | None:
        """Seconds left at the current speed, while the run trains."""
        if not self.steps_per_second or self.total_steps is None or not self.active:
            return None
        return (self.total_steps - self.step) / self.steps_per_second
