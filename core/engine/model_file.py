"""A run's trained model as a `.keras` file, with its optimizer inside.

The model is rebuilt from the run's config and takes the state of one of its checkpoints
(the last, the best validated, or a given step), then is compiled with the run's loss and
its optimizer (slots, step count and live knob values as they were) and saved in Keras's
format. `core.optimizers.load_model` (or `keras.models.load_model` once the lab's
optimizer classes are imported) loads it in any Python process, ready to predict or to
train on with `fit`.

The dashboard gets a run's model without TensorFlow: it asks the serving engine for it
(an `export` command), which writes it once beside its checkpoint (`kept_model`).
"""

from __future__ import annotations

import os
from pathlib import Path

from core.engine.checkpoints import Checkpoint, RunCheckpoints
from core.knobs import InvalidInput
from core.store import Store, UnknownRunError, modes
from core.training import tf_import
from core.training.config import RunConfig

#: Which checkpoint to save: the last, the best validated, or a step given as text.
CHOICES = ("last", "best")


def save_model(store: Store, run_id: str, path: Path, checkpoint: str = "last") -> Checkpoint:
    """Writes run `run_id`'s model at `checkpoint` (`"last"`, `"best"` or a step) to
    `path` (a `.keras` file); returns the checkpoint it took. Raises `InvalidInput`
    naming `checkpoint` or `model` for a checkpoint that does not exist or a bad path."""
    if Path(path).suffix != ".keras":
        raise InvalidInput({"model": f"must be a .keras file (got {str(path)!r})"})
    chosen = choose_checkpoint(store, run_id, checkpoint)
    record = store.get_run(run_id)
    assert record is not None
    tf_import.load()
    from core.training.strategies import make_strategy
    from core.training.trainer import Trainer

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


def kept_model(store: Store, run_id: str, checkpoint: str = "last") -> Path:
    """The `.keras` file of run `run_id` at `checkpoint`, kept beside the checkpoint
    (`RunCheckpoints.model_path`) and written only the first time it is asked for; it
    goes when the checkpoint is pruned or the run deleted. Raises as `save_model`."""
    chosen = choose_checkpoint(store, run_id, checkpoint)
    path = RunCheckpoints(store.checkpoint_folder(run_id)).model_path(chosen.step)
    if not path.exists():
        # Under another name first: a reader never sees a file half written.
        partial = path.with_name(f"{path.stem}.partial{os.getpid()}.keras")
        try:
            save_model(store, run_id, partial, str(chosen.step))
            modes.settle(partial)  # Keras made it at the umask's mode, as for a user's path
            os.replace(partial, path)
        finally:
            partial.unlink(missing_ok=True)
    return path


def choose_checkpoint(store: Store, run_id: str, checkpoint: str) -> Checkpoint:
    """Run `run_id`'s checkpoint named by `checkpoint`: `"last"`, `"best"` (validated)
    or a step as text. Raises `UnknownRunError`, or `InvalidInput` naming `checkpoint`."""
    if store.get_run(run_id) is None:
        raise UnknownRunError(run_id)
    saved = RunCheckpoints(store.checkpoint_folder(run_id))
    if checkpoint == "last":
        chosen = saved.last()
    elif checkpoint == "best":
        chosen = saved.best()
    elif isinstance(checkpoint, str) and checkpoint.isdigit():
        chosen = saved.find(int(checkpoint))
    else:
        raise InvalidInput(
            {"checkpoint": f"must be {' or '.join(CHOICES)} or a step (got {checkpoint!r})"}
        )
    if chosen is None:
        raise InvalidInput({"checkpoint": f"run {run_id} has no {checkpoint!r} checkpoint"})
    return chosen
