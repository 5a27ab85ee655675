"""A run's checkpoints on disk, and when a run saves one.

Each checkpoint of step S is three files in the run's folder beside the store (see
`Store.checkpoint_folder`): the TensorFlow checkpoint `step-S.index` and
`step-S.data-00000-of-00001` (every variable of `Trainer.state`), then `step-S.json`
(the step, the training time up to it, the wall time), written last, under a temporary
name renamed into place: a checkpoint without its `.json` was cut short and does not
count. Together with the run's config and seed they are the run's whole state, so a run
resumed from one continues exactly as it would have. Once asked for, the trained model of
a checkpoint joins its files as `step-S.keras` (see `core.engine.model_file`).

This module reads and writes files only, at the modes of the lab's files (its owner's
alone by default: `core.store.modes`); the trainer makes and reads the TensorFlow
checkpoint itself (`Trainer.save`, `Trainer.restore`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.store import modes

# A run keeps its last few checkpoints (and those a fork was taken from, and its best).
KEEP = 3
# Beside them, a history over the whole run to fork from: for each step of the 1-2-5
# series (1, 2, 5, 10, 20, 50, ...), the first checkpoint at or after it; of those, the
# latest `HISTORY` (three decades). A run keeps at most KEEP + HISTORY checkpoints, and
# those of its forks and its best.
HISTORY = 9
# With `checkpoint_every` empty: a checkpoint every this many seconds of training, or
# less often when saving would take more than `BUDGET` of the training time.
AUTO_SECONDS = 30.0
BUDGET = 0.02

_NAME = re.compile(r"step-(\d+)\.json")


@dataclass(frozen=True)
class Checkpoint:
    """One saved checkpoint.

    Attributes:
        step: The last step it includes: a run resumed from it continues at step + 1.
        seconds: Training time up to it, pauses excluded.
        time: When it was saved (Unix seconds).
        prefix: The TensorFlow checkpoint's path prefix.
        bytes: Its size on disk.
        val_accuracy: The validation accuracy at its step, when the run validated there.
    """

    step: int
    seconds: float
    time: float
    prefix: str
    bytes: int
    val_accuracy: float | None = None


def best_of(saved: Iterable[Checkpoint]) -> Checkpoint | None:
    """Of the checkpoints saved where the run validated, the one with the highest
    validation accuracy (the latest of equals)."""
    validated = [c for c in saved if c.val_accuracy is not None]
    return max(validated, key=lambda c: (c.val_accuracy, c.step), default=None)


class RunCheckpoints:
    """The checkpoints in one run's folder (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def list(self) -> list[Checkpoint]:
        """The complete checkpoints, by step."""
        if not self.folder.is_dir():
            return []
        found = []
        for path in self.folder.iterdir():
            if (match := _NAME.fullmatch(path.name)) is None:
                continue
            try:
                info = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # being deleted, or not ours
            step = int(match.group(1))
            found.append(self._checkpoint(step, info))
        return sorted(found, key=lambda checkpoint: checkpoint.step)

    def last(self) -> Checkpoint | None:
        """The checkpoint of the largest step, if any."""
        saved = self.list()
        return saved[-1] if saved else None

    def find(self, step: int) -> Checkpoint | None:
        """The checkpoint of `step`, if there is one."""
        return next((c for c in self.list() if c.step == step), None)

    def save(
        self,
        step: int,
        seconds: float,
        write: Callable[[str], None],
        val_accuracy: float | None = None,
    ) -> Checkpoint:
        """Saves the checkpoint of `step`: `write(prefix)` writes the TensorFlow files,
        then the `.json` marks it complete. A step saved already is kept as it is.

        Args:
            step: The last step the checkpoint includes.
            seconds: The run's training time up to it, pauses excluded (a resumed run's
                clock starts from it).
            write: Writes the model's and the optimizer's state under the path prefix
                it is given (the trainer's `save`).
            val_accuracy: The validation accuracy at `step`, when the run validated
                there: what `best` picks by.
        """
        if (saved := self.find(step)) is not None:
            return saved
        modes.make_folder(self.folder)
        prefix = self._prefix(step)
        write(prefix)
        modes.settle(*self._files(step))  # TensorFlow made them at the umask's mode
        info = {
            "step": step,
            "seconds": round(seconds, 3),
            "time": time.time(),
            "val_accuracy": val_accuracy,
        }
        marker = Path(f"{prefix}.json")
        temporary = marker.with_suffix(".json.tmp")
        with modes.open_file(temporary, "w") as file:
            file.write(json.dumps(info))
        os.replace(temporary, marker)
        return self._checkpoint(step, info)

    def best(self) -> Checkpoint | None:
        """See `best_of`."""
        return best_of(self.list())

    def model_path(self, step: int) -> Path:
        """Where the `.keras` model of the checkpoint of `step` is kept, once written
        (see `core.engine.model_file.kept_model`): one of the checkpoint's files."""
        return self.folder / f"step-{step}.keras"

    def copy(self, step: int, folder: Path) -> Checkpoint:
        """Copies the checkpoint of `step` into `folder` (a fork's), its marker last;
        returns the copy."""
        target = RunCheckpoints(folder)
        modes.make_folder(target.folder)
        files = sorted(self._files(step), key=lambda path: path.suffix == ".json")
        for path in files:
            modes.settle(shutil.copy2(path, target.folder / path.name))  # not the original's
        copied = target.find(step)
        if copied is None:
            raise FileNotFoundError(f"no checkpoint of step {step} in {self.folder}")
        return copied

    def prune(
        self, keep: int = KEEP, protected: Collection[int] = (), history: int = HISTORY
    ) -> None:
        """Deletes all but the last `keep` checkpoints, the `protected` steps and the
        latest `history` of the run's history (see `spread`)."""
        saved = [c.step for c in self.list()]
        kept = {*saved[len(saved) - keep :], *protected, *spread(saved, history)}
        for step in saved:
            if step not in kept:
                self._delete(step)

    def size(self) -> int:
        """Bytes on disk, every file of the folder counted."""
        if not self.folder.is_dir():
            return 0
        return sum(path.stat().st_size for path in self.folder.iterdir() if path.is_file())

    def delete(self) -> None:
        """Deletes every checkpoint, and the folder."""
        shutil.rmtree(self.folder, ignore_errors=True)

    def _checkpoint(self, step: int, info: dict[str, Any]) -> Checkpoint:
        return Checkpoint(
            step,
            info["seconds"],
            info["time"],
            self._prefix(step),
            self._size(step),
            info.get("val_accuracy"),
        )

    def _prefix(self, step: int) -> str:
        return str(self.folder / f"step-{step}")

    def _files(self, step: int) -> list[Path]:
        return list(self.folder.glob(f"step-{step}.*"))

    def _size(self, step: int) -> int:
        return sum(path.stat().st_size for path in self._files(step))

    def _delete(self, step: int) -> None:
        marker = Path(f"{self._prefix(step)}.json")
        marker.unlink(missing_ok=True)  # first: the checkpoint stops counting at once
        for path in self._files(step):
            path.unlink(missing_ok=True)


def spread(steps: Sequence[int], limit: int = HISTORY) -> list[int]:
    """Of `steps` (ascending), the first at or after each step of the 1-2-5 series up to
    the last, the latest `limit` of them. Once one is picked, no step saved later displaces
    it (a later step is never the first after a rung already passed), so a run keeps the
    same history as it grows, rungs adding at a steady log spacing."""
    picked: list[int] = []
    rung = 1
    for step in steps:
        if step >= rung:
            picked.append(step)
            while rung <= step:
                rung = _next_rung(rung)
    return picked[max(0, len(picked) - limit) :] if limit > 0 else []


def _next_rung(rung: int) -> int:
    """The step after `rung` in the 1-2-5 series: 1, 2, 5, 10, 20, 50, ..."""
    return rung * 5 // 2 if str(rung).startswith("2") else rung * 2


class CheckpointSchedule:
    """When a run saves its next checkpoint.

    With an interval, every `every` steps. Without one (`every=None`), after every
    `AUTO_SECONDS` of training, and never sooner than `took / BUDGET` seconds of training
    after a save that took `took` seconds: saving so takes at most `BUDGET` of the
    training time, however slow the disk or large the model.
    """

    def __init__(self, every: int | None, seconds: float = 0.0) -> None:
        """`seconds`: the run's training time when it starts (a resumed run's, so far)."""
        self.every = every
        self._since = seconds  # training time at the end of the last save
        self._wait = AUTO_SECONDS

    def due(self, step: int, training_seconds: float) -> bool:
        """Whether step `step` (just taken, at `training_seconds` of training) is saved."""
        if self.every is not None:
            return self.every > 0 and step % self.every == 0
        return training_seconds - self._since >= self._wait

    def saved(self, took: float, training_seconds: float) -> None:
        """Notes a save that took `took` seconds and ended at `training_seconds`."""
        self._since = training_seconds
        self._wait = max(AUTO_SECONDS, took / BUDGET)
