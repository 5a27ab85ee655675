"""A run's trained model as a `.keras` file, with its optimizer inside.

The model is rebuilt from the run's config and takes the state of one of its checkpoints
(the last, the best validated, or a given step), then is compiled with the run's loss and
its optimizer (slots, step count and live knob values as they were) and saved in Keras's
format. `core.optimizers.load_model` (or `keras.models.load_model` once the lab's
optimizer classes are imported) loads it in any Python process, ready to predict or to
train on with `fit`.
"""

from __future__ import annotations

from pathlib import Path

from core.engine.checkpoints import Checkpoint, RunCheckpoints
from core.engine.config import RunConfig
from core.knobs import InvalidInput
from core.store import Store, UnknownRunError

#: Which checkpoint to save: the last, the best validated, or a step given as text.
CHOICES = ("last", "best")


def save_model(store: Store, run_id: str, path: Path, checkpoint: str = "last") -> Checkpoint:
    """Writes run `run_id`'s model at `checkpoint` (`"last"`, `"best"` or a step) to
    `path` (a `.keras` file); returns the checkpoint it took. Raises `InvalidInput`
    naming `checkpoint` or `model` for a checkpoint that does not exist or a bad path."""
    if store.get_run(run_id) is None:
        raise UnknownRunError(f"run_id: no run {run_id!r}")
    if Path(path).suffix != ".keras":
        raise InvalidInput({"model": f"must be a .keras file (got {str(path)!r})"})
    chosen = _chosen(RunCheckpoints(store.checkpoint_folder(run_id)), checkpoint)
    if chosen is None:
        raise InvalidInput({"checkpoint": f"run {run_id} has no {checkpoint!r} checkpoint"})
    record = store.get_run(run_id)
    assert record is not None
    from core.engine.strategies import make_strategy
    from core.engine.trainer import Trainer

    # One device whatever the run trained on: a checkpoint reads into any strategy.
    trainer = Trainer(RunConfig.from_dict(record.config), make_strategy("default"))
    try:
        trainer.restore(chosen.prefix)
        model = trainer.model
        model.compile(optimizer=trainer.optimizer, **trainer.task.compile_arguments())
        model.save(path)
    finally:
        trainer.close()
    return chosen


def _chosen(saved: RunCheckpoints, checkpoint: str) -> Checkpoint | None:
    if checkpoint == "last":
        return saved.last()
    if checkpoint == "best":
        return saved.best()
    if not checkpoint.isdigit():
        raise InvalidInput(
            {"checkpoint": f"must be {' or '.join(CHOICES)} or a step (got {checkpoint!r})"}
        )
    return saved.find(int(checkpoint))
