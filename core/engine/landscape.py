"""The loss landscape around a checkpoint (Li et al., "Visualizing the Loss Landscape of
Neural Nets", NeurIPS 2018), on one fixed batch: the batch the run took right after the
checkpoint, so that the landscape's centre is the loss the run logged at the next step. A
run's last checkpoint has no next step; its landscape is on the batch of its own step, the
last one the run took (`batch_step`).

    L(θ + a·d)            a ∈ [−1, 1]: along the update d the optimizer takes from θ on
                                     that batch, and along a random direction δ₁
    L(θ + a·δ₁ + b·δ₂)    a, b ∈ [−1, 1]: over the plane of two random directions

(δ, not η, which names the learning rate everywhere else in the lab.) Each direction is
filter-normalized: a kernel's slice per output unit (its last axis) scaled to the norm of
the same slice of θ, and biases left out (zero), so that distances mean the same across
layers of different scales. The run's other checkpoints are projected on the (δ₁, δ₂)
plane (least squares), a trace of where the run came from.

A landscape is computed once per checkpoint, by the engine process (the dashboard never
imports TensorFlow), and kept beside the checkpoint as `step-N.landscape.npz`; while it is
computed, `step-N.landscape.progress` holds the fraction done.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core.engine.checkpoints import RunCheckpoints
from core.knobs import InvalidInput
from core.store import Store, modes
from core.training import tf_import
from core.training.config import RunConfig

POINTS = 41  # along each 1-D slice
GRID = 15  # per side of the 2-D surface


@dataclass(frozen=True)
class Landscape:
    """A checkpoint's landscape (see the module docstring).

    Attributes:
        step: The checkpoint's step.
        offsets: a (or b), from −1 to 1, for the slices and each side of the surface.
        along_update, along_random: The loss along d and along δ₁, one per offset.
        surface: The loss over the (δ₁, δ₂) plane, `surface[i, j]` at a = offsets[j],
            b = offsets[i].
        trajectory_steps, trajectory: The run's checkpoints and their (a, b) on the plane.
    """

    step: int
    offsets: np.ndarray
    along_update: np.ndarray
    along_random: np.ndarray
    surface: np.ndarray
    trajectory_steps: np.ndarray
    trajectory: np.ndarray

    @property
    def centre(self) -> float:
        """The loss at the checkpoint itself."""
        return float(self.along_update[len(self.offsets) // 2])

    @property
    def update_is_zero(self) -> bool:
        """Whether the optimizer's update from the checkpoint is zero (a learning rate of
        0 there), so that the loss along it is flat: the weights never move along d."""
        return not np.ptp(self.along_update)

    def save(self, path: Path) -> None:
        partial = path.with_name(f"{path.name}.partial{os.getpid()}.npz")
        with modes.open_file(partial, "wb") as file:
            np.savez(file, **{k: np.asarray(v) for k, v in self.__dict__.items()})
        os.replace(partial, path)  # a reader never sees a file half written

    @classmethod
    def load(cls, path: Path) -> Landscape:
        with np.load(path) as saved:
            values = {key: saved[key] for key in saved.files}
        values["step"] = int(values["step"])
        return cls(**values)


def batch_step(step: int, total_steps: int | None) -> int:
    """The step whose batch the landscape of a checkpoint of `step` is taken on, in a run
    of `total_steps`: the next step's, but at the run's end (or past it), its own."""
    return step if total_steps is not None and step >= total_steps else step + 1


def landscape_path(store: Store, run_id: str, step: int) -> Path:
    return RunCheckpoints(store.checkpoint_folder(run_id)).folder / f"step-{step}.landscape.npz"


def progress_path(store: Store, run_id: str, step: int) -> Path:
    return landscape_path(store, run_id, step).with_suffix(".progress")


def read_progress(store: Store, run_id: str, step: int) -> float | None:
    """The fraction of the landscape computed so far; None when none is under way."""
    try:
        return float(json.loads(progress_path(store, run_id, step).read_text())["done"])
    except (OSError, ValueError, KeyError):
        return None


def kept_landscape(store: Store, run_id: str, step: int) -> Landscape:
    """The landscape of run `run_id`'s checkpoint of `step`, computed the first time and
    kept beside it. Raises `InvalidInput` naming `checkpoint` when there is no such
    checkpoint."""
    path = landscape_path(store, run_id, step)
    if path.exists():
        return Landscape.load(path)
    progress = progress_path(store, run_id, step)

    def report(done: float) -> None:
        with modes.open_file(progress, "w") as file:
            file.write(json.dumps({"done": round(done, 3)}))

    try:
        landscape = compute(store, run_id, step, report)
        landscape.save(path)
    finally:
        progress.unlink(missing_ok=True)
    return landscape


def compute(
    store: Store, run_id: str, step: int, report: Callable[[float], None] = lambda done: None
) -> Landscape:
    """Computes the landscape (see the module docstring), calling `report` with the
    fraction done as it goes."""
    record = store.get_run(run_id)
    checkpoints = RunCheckpoints(store.checkpoint_folder(run_id))
    chosen = checkpoints.find(step)
    if record is None or chosen is None:
        raise InvalidInput({"checkpoint": f"run {run_id} has no checkpoint of step {step}"})
    tf_import.load()
    import tensorflow as tf

    from core.training.strategies import make_strategy
    from core.training.trainer import Trainer

    report(0.0)
    # One device, and the batches from the checkpoint's own step on (see `_batch_of`).
    trainer = Trainer(
        RunConfig.from_dict(record.config), make_strategy("default"), start=max(step - 1, 0)
    )
    try:
        trainer.restore(chosen.prefix)
        x, y = _batch_of(trainer._batches, step, batch_step(step, trainer.data.total_steps))
        model, task = trainer.model, trainer.task
        variables = model.trainable_variables
        origin = [v.numpy() for v in variables]

        @tf.function(autograph=False)
        def loss_on_batch() -> tf.Tensor:
            return tf.reduce_mean(task.total(task.losses(model(x, training=True), y)))

        def loss_at(*moves: tuple[float, list[np.ndarray]]) -> float:
            """The loss at the checkpoint's weights moved by Σ a·d over `moves` (a, d)."""
            for i, (variable, start) in enumerate(zip(variables, origin, strict=True)):
                variable.assign(start + sum(a * d[i] for a, d in moves))
            return float(loss_on_batch())

        grads = task.gradients(model, x, y).grads
        trainer.optimizer.apply_gradients(zip(grads, variables, strict=True))
        update = [v.numpy() - start for v, start in zip(variables, origin, strict=True)]
        rng = np.random.default_rng(trainer.config.seed)
        toward_update = _filter_normalized(update, origin)
        random_1, random_2 = (
            _filter_normalized([rng.standard_normal(o.shape) for o in origin], origin)
            for _ in range(2)
        )
        offsets = np.linspace(-1.0, 1.0, POINTS)
        total = 2 * POINTS + GRID * GRID
        done = 0

        def counted(value: float) -> float:
            nonlocal done
            done += 1
            if done % 10 == 0:
                report(done / total)
            return value

        along_update = np.array([counted(loss_at((a, toward_update))) for a in offsets])
        along_random = np.array([counted(loss_at((a, random_1))) for a in offsets])
        side = np.linspace(-1.0, 1.0, GRID)
        surface = np.array(
            [[counted(loss_at((a, random_1), (b, random_2))) for a in side] for b in side]
        )
        steps, coordinates = _trajectory(trainer, checkpoints, origin, random_1, random_2)
    finally:
        trainer.close()
    report(1.0)
    return Landscape(step, offsets, along_update, along_random, surface, steps, coordinates)


def _batch_of(batches: Iterator[Any], step: int, wanted: int) -> Any:
    """The batch of step `wanted` (`step` or the next) from `batches`, which start at the
    batch of `step` (of step 1 when `step` is 0)."""
    own = next(batches) if step > 0 else None
    return own if wanted == step else next(batches)


def _filter_normalized(direction: list[np.ndarray], weights: list[np.ndarray]) -> list[np.ndarray]:
    """Each kernel's slice per output unit (its last axis; a conv kernel's slice has three
    axes, a dense one's one) scaled to that slice's norm in `weights`; vectors (biases,
    norms' scales) set to zero."""
    out = []
    for d, w in zip(direction, weights, strict=True):
        if d.ndim < 2:
            out.append(np.zeros_like(w))
            continue
        scale = _unit_norms(w) / np.maximum(_unit_norms(d), 1e-12)
        out.append((d * scale).astype(w.dtype))
    return out


def _unit_norms(kernel: np.ndarray) -> np.ndarray:
    """The L2 norm of each output unit's slice of `kernel`, over every axis but the last
    (`np.linalg.norm` takes at most two axes)."""
    return np.sqrt(np.sum(np.square(kernel, dtype=np.float64), axis=tuple(range(kernel.ndim - 1))))


def _trajectory(
    trainer: Any,
    checkpoints: RunCheckpoints,
    origin: list[np.ndarray],
    first: list[np.ndarray],
    second: list[np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """The run's checkpoints' weights, minus the centre's, projected by least squares
    on the plane of `first` and `second`."""
    plane = np.stack(
        [np.concatenate([d.ravel() for d in first]), np.concatenate([d.ravel() for d in second])],
        axis=1,
    )
    centre = np.concatenate([w.ravel() for w in origin])
    steps, coordinates = [], []
    for checkpoint in checkpoints.list():
        trainer.restore(checkpoint.prefix)
        weights = np.concatenate([v.numpy().ravel() for v in trainer.model.trainable_variables])
        solution, *_ = np.linalg.lstsq(plane, weights - centre, rcond=None)
        steps.append(checkpoint.step)
        coordinates.append(solution)
    return np.array(steps, np.int64), np.array(coordinates, np.float64).reshape(-1, 2)
