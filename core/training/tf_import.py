"""The training stack (TensorFlow, Keras, the trainer), imported by one thread at a time.

The engine imports TensorFlow lazily, so that it serves its store at once, and several of
its threads may be the first to need it: the warm-up, every run that starts, a model
export. TensorFlow's modules import each other in cycles; two threads importing them at
once each hold some of their import locks and wait for the other's, and Python breaks the
cycle by raising `_DeadlockError` in one or handing it a module half made
(`module 'tensorflow.python.data.ops.dataset_ops' has no attribute 'DatasetV2'`): the
demo race's three runs failed so, started while the warm-up imported. Each such thread
calls `load()` before its first import of the stack.

Once imported, the stack's objects (about 400,000) are moved out of the garbage
collector's sight with `gc.freeze()`: they live as long as the process, and a full
collection that walked them took 0.19 s, with every thread stopped, at the end of each run
(`RunExecution` collects a finished run's reference cycles) and whenever Python's own
collector ran its oldest generation. After the freeze it takes microseconds.
"""

from __future__ import annotations

import gc
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
        if _loaded:  # imported (and frozen) while this thread waited: not twice
            return
        import keras

        from core.optimizers import registry
        from core.training import strategies, trainer

        # Imported for their effect; named here so that no linter's fix of "unused"
        # imports takes them away (one once dropped two of them).
        del keras, registry, strategies, trainer

        gc.collect()  # the imports' own garbage is not frozen with them
        gc.freeze()
        _loaded = True
