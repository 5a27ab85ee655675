"""The training engine: run configs, the instrumented trainer, and background runs.

    >>> from core.engine import Engine, RunConfig
    >>> engine = Engine()                                # runs/optlab.sqlite
    >>> run_id = engine.start(RunConfig(optimizer="projected_gd", epochs=2))
    >>> engine.update(run_id, radius=5.0)                # from the next step on
    >>> engine.metrics(run_id, since_step=100)["loss"]

Importing `core.engine` does not import TensorFlow; starting a run does, and so does
reading `core.engine.LabCallback`, the Keras callback that records any script's `fit` as
a lab run.
"""

from typing import Any

from core.engine.engine import Engine
from core.engine.status import RunStatus
from core.training.config import FIELDS, STRATEGIES, TASKS, RunConfig, fields, run_fields

__all__ = [
    "FIELDS",
    "STRATEGIES",
    "TASKS",
    "Engine",
    "LabCallback",
    "RunConfig",
    "RunStatus",
    "fields",
    "run_fields",
]


def __getattr__(name: str) -> Any:
    if name == "LabCallback":  # a Keras class: Keras is imported only when it is asked for
        from core.engine.callback import LabCallback

        return LabCallback
    raise AttributeError(f"module 'core.engine' has no attribute {name!r}")
