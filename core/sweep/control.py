"""Sweep commands through the store: how any process starts, stops or resumes a sweep
that another process drives, and how the driver says where it stands.

A sweep's study lives in the lab's store (Optuna's tables beside the runs), and two of its
user attributes carry what a run's `commands` rows carry for a run (see
`core.engine.commands`):

- `COMMAND_ATTR`, the last command anyone wrote: `run` (start, or resume: the engine
  process drives it, see `core.sweep.hosting`) or `stop` (whoever drives it stops it and
  its runs). A command is a state asked for, so the last one wins.
- `DRIVER_ATTR`, written by the driving process: who drives it (or drove it last), how
  that drive stands (`running`, or how it ended), and which command was current when it
  began, so that the engine takes up a `run` once, and a driver stops on a `stop` that
  came after it began.

A dashboard then drives nothing: it writes a command and reads the study. A driver in any
process (the engine's, or `optlab sweep`'s own) reads the command each round, so a sweep is
stopped from whichever process looks at it. Importing this module does not import Optuna.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from core.store import owner

if TYPE_CHECKING:
    import optuna

#: The study's user attributes: the last command, and its driver's record.
COMMAND_ATTR: Final = "optlab_command"
DRIVER_ATTR: Final = "optlab_driver"
#: How a drive ended, for good: the engine takes such a sweep up again only on a new `run`.
ENDED: Final = ("done", "stopped", "failed")
#: The states of a drive at work.
WORKING: Final = ("running", "stopping")


@dataclass(frozen=True)
class SweepCommand:
    """What was last asked of a sweep, by whom (`core.store.owner`) and when."""

    id: str
    kind: Literal["run", "stop"]
    by: str
    at: float


@dataclass(frozen=True)
class DriverRecord:
    """A sweep's driver, as it wrote itself into the study.

    Attributes:
        owner: The driving process (`core.store.owner`).
        state: `running`, `stopping`, or how it ended: `done`, `stopped`, `failed`, or
            `interrupted` (its process closed: the engine's next start resumes it).
        command: The id of the command current when the drive began, if any.
        hosted: Whether the engine process drove it (then its next start resumes it if
            it was cut short); false for a driver of its own (`optlab sweep`, a script).
        error: Why it failed.
    """

    owner: str
    state: str
    command: str | None
    hosted: bool
    error: str | None = None


def command_of(attrs: Mapping[str, Any]) -> SweepCommand | None:
    """The study's last command, from its user attributes."""
    stored = attrs.get(COMMAND_ATTR)
    return SweepCommand(**stored) if isinstance(stored, Mapping) else None


def driver_of(attrs: Mapping[str, Any]) -> DriverRecord | None:
    """The study's driver record, from its user attributes."""
    stored = attrs.get(DRIVER_ATTR)
    return DriverRecord(**stored) if isinstance(stored, Mapping) else None


def write_command(study: optuna.Study, kind: Literal["run", "stop"]) -> SweepCommand:
    """Writes `kind` as the study's command, from this process; returns it."""
    command = SweepCommand(secrets.token_hex(8), kind, owner.current(), time.time())
    study.set_user_attr(COMMAND_ATTR, asdict(command))
    return command


def write_driver(study: optuna.Study, record: DriverRecord) -> None:
    study.set_user_attr(DRIVER_ATTR, asdict(record))


def stop_asked(attrs: Mapping[str, Any], since: str | None) -> bool:
    """Whether a `stop` came after the command `since` (current when a drive began)."""
    command = command_of(attrs)
    return command is not None and command.kind == "stop" and command.id != since


def stored_state(attrs: Mapping[str, Any], alive: Callable[[str], bool]) -> str:
    """Where a sweep that this process does not drive stands, from its study's
    attributes: a drive at work (`running`, or `stopping` once a stop is asked) while its
    process lives (`alive`); `interrupted` when that process died; how it ended; `running`
    while a `run` waits for the engine; `idle` for a study no driver ever recorded."""
    command, record = command_of(attrs), driver_of(attrs)
    waiting = command is not None and command.kind == "run"
    if record is None:
        return "running" if waiting else "idle"
    if record.state in WORKING:
        if not alive(record.owner):
            return "interrupted"
        return "stopping" if stop_asked(attrs, record.command) else record.state
    if waiting and command is not None and command.id != record.command:
        return "running"  # resumed: the engine takes it up within a poll
    return record.state


def to_take_up(attrs: Mapping[str, Any], alive: Callable[[str], bool]) -> bool:
    """Whether the engine should drive a study it does not drive now: a `run` it has not
    taken up, or one whose drive by an engine was cut short (the engine closed, or its
    process died); never while another live process drives it. `alive` says whether a
    process lives (this one's drives being none, by the caller's account)."""
    command, record = command_of(attrs), driver_of(attrs)
    if command is None or command.kind != "run":
        return False
    if record is None:
        return True
    if record.state in WORKING and alive(record.owner):
        return False
    if record.command != command.id:
        return True
    return record.hosted and record.state not in ENDED
