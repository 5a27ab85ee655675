"""The training engine: run configs, the instrumented trainer, and background runs.

    >>> from core.engine import Engine, RunConfig
    >>> engine = Engine()                                # runs/optlab.sqlite
    >>> run_id = engine.start(RunConfig(optimizer="projected_gd", epochs=2))
    >>> engine.update(run_id, radius=5.0)                # from the next step on
    >>> engine.metrics(run_id, since_step=100)["loss"]

Importing `core.engine` does not import TensorFlow; starting a run does.
"""

from core.engine.config import FIELDS, STRATEGIES, TASKS, RunConfig, fields, run_fields
from core.engine.engine import Engine
from core.engine.status import RunStatus

__all__ = [
    "FIELDS",
    "STRATEGIES",
    "TASKS",
    "Engine",
    "RunConfig",
    "RunStatus",
    "fields",
    "run_fields",
]
