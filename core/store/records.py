"""What the store returns about runs and events, and the statuses a run moves through."""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

#: Statuses of a run that has not ended; a process that dies leaves its runs in one of them.
ACTIVE_STATUSES: Final = ("queued", "running", "paused")
#: Statuses of a run that has ended; `finish` accepts only these.
FINAL_STATUSES: Final = ("completed", "stopped", "diverged", "failed", "interrupted")
STATUSES: Final = ACTIVE_STATUSES + FINAL_STATUSES
#: Final statuses a run can be resumed from, at its last checkpoint.
RESUMABLE_STATUSES: Final = ("stopped", "interrupted")


def check_status(status: str, allowed: Sequence[str] = STATUSES) -> str:
    """Return `status` if it is one of `allowed`; raise `ValueError` otherwise."""
    if status not in allowed:
        raise ValueError(f"status must be one of {', '.join(allowed)}; got {status!r}")
    return status


def to_json(value: Mapping[str, Any]) -> str:
    """Encode a config, payload or metrics mapping; numpy scalars and arrays become plain values.

    NaN and infinities are kept (as Python's `json` writes them), because a diverged run's
    final loss is exactly such a value.
    """
    return json.dumps(dict(value), default=_plain)


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot store a {type(value).__name__} as JSON: {value!r}")


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One row of the runs table, with its JSON columns parsed. Times are Unix seconds."""

    id: str
    name: str
    status: str
    config: dict[str, Any]
    created: float
    updated: float
    started: float | None  # first time the run became `running`
    finished: float | None  # when `finish` was called
    step: int  # last step the run reported (or flushed metrics for)
    total_steps: int | None
    error: str | None
    final_metrics: dict[str, Any] | None
    owner: str | None = None  # the process that runs (or ran) it
    tags: tuple[str, ...] = ()
    speed: float | None = None  # steps per second, while it trains
    parent: str | None = None  # the run it was forked from
    forked_at: int | None = None  # the parent's checkpoint step it started from
    node: str | None = None  # the machine (or Ray node) that trains it

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "RunRecord":
        """Build a record from a runs-table row keyed by column name."""
        fields = dict(row)
        fields["config"] = json.loads(fields["config"])
        fields["tags"] = tuple(json.loads(fields["tags"]))
        if fields["final_metrics"] is not None:
            fields["final_metrics"] = json.loads(fields["final_metrics"])
        return cls(**fields)

    @property
    def active(self) -> bool:
        """Whether the run has not ended yet."""
        return self.status in ACTIVE_STATUSES

    @property
    def progress(self) -> float | None:
        """Fraction of `total_steps` done, in [0, 1]; None when the total is unknown."""
        if not self.total_steps:
            return None
        return min(max(self.step / self.total_steps, 0.0), 1.0)


#: Event kinds. A live knob change: `{"name", "value", "previous"}`; the first non-finite
#: step: `{"loss"}`; per-layer histograms: `{"edges", "grad", "weight"}`.
KNOB_EVENT: Final = "knob"
DIVERGED_EVENT: Final = "diverged"
HISTOGRAM_EVENT: Final = "histogram"
#: A resumed run took up its checkpoint of this step; the steps after it were trained again.
RESTORED_EVENT: Final = "restored"
#: A learning-rate range test ended early at this step: `{"reason"}` (see `core.engine.lr_find`).
LR_FIND_ENDED_EVENT: Final = "lr_find_ended"
#: A DP-SGD run stopped at this step: the next would have spent more than its ε budget
#: (`core.training.private_run.PrivateRun.record`: n, q, the accountant, δ, σ, C, …).
PRIVACY_BUDGET_EVENT: Final = "privacy_budget_spent"
#: The per-layer statistics are recorded every `{"every"}` steps from this one on; `{"budget"}`
#: is the share of training time they are held to, or None when the run set the interval.
PER_LAYER_EVENT: Final = "per_layer_interval"
#: The run was started with others as one launch (a recipe's), at step 0: the launch as
#: its maker keeps it (`core.recipes.Launch.to_dict`: the recipe, its runs by arm, its
#: probe), on each of its runs, so that any session finds the whole launch from any run.
LAUNCH_EVENT: Final = "launch"


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened to a run at a step (`kind`, one of the `*_EVENT`s), e.g. a
    live change of learning rate."""

    id: int  # increases in insertion order
    run_id: str
    step: int
    time: float
    kind: str
    payload: dict[str, Any]


#: What a command asks of a run's owner: `set` carries `{"knobs": {name: value}}`. An
#: `export` (`{"checkpoint": "last" | "best" | step}`) is asked of the serving engine,
#: whoever trained the run: it writes the run's model beside that checkpoint.
COMMAND_KINDS: Final = ("start", "stop", "pause", "resume", "set", "export", "landscape")


@dataclass(frozen=True, slots=True)
class Command:
    """A request to the process that owns a run, and what became of it."""

    id: int  # increases in the order commands were written
    run_id: str
    kind: str
    payload: dict[str, Any]
    created: float
    handled: float | None = None  # when the owner carried it out, or refused it
    error: str | None = None  # why it was refused


@dataclass(frozen=True, slots=True)
class Service:
    """A process that serves the store: an engine, which takes new runs, a dashboard, or
    a process that trains runs (its heartbeat). Times are the database's clock."""

    owner: str  # host:pid:start, as `core.store.owner` writes it
    role: str
    started: float
    heartbeat: float  # the last time it said it was alive (see `core.store.owner`)
    info: dict[str, Any]
