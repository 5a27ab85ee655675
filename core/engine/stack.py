"""The training stack (TensorFlow, Keras, the trainer), imported by one thread at a time.

The engine imports TensorFlow lazily, so that it serves its store at once, and several of
its threads may be the first to need it: the warm-up, every run that starts, a model
export. TensorFlow's modules import each other in cycles; two threads importing them at
once each hold some of their import locks and wait for the other's, and Python breaks the
cycle by raising `_DeadlockError` in one or handing it a module half made
(`module 'tensorflow.python.data.ops.dataset_ops' has no attribute 'DatasetV2'`): the
demo race's three runs failed so, started while the warm-up imported. Each such thread
calls `load()` before its first import of the stack.
"""

from __future__ import annotations

import threading

_LOCK = threading.Lock()
_loaded = False


def load() -> None:
    """Imports the training stack unless it is imported already; another thread that
    imports it meanwhile waits for this one."""
    global _loaded
    if _loaded:  # set only once every module is whole
        return
    with _LOCK:
        import keras  # noqa: F401  (its backend imports TensorFlow)

        import core.engine.strategies
        import core.engine.trainer
        import core.optimizers.registry  # noqa: F401

        _loaded = True
