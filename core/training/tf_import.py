"""The training stack (TensorFlow, Keras, the trainer), imported by one thread at a time,
with TensorFlow's native start-up lines kept off the terminal.

The engine imports TensorFlow lazily, so that it serves its store at once, and several of
its threads may be the first to need it: the warm-up, every run that starts, a model
export. TensorFlow's modules import each other in cycles; two threads importing them at
once each hold some of their import locks and wait for the other's, and Python breaks the
cycle by raising `_DeadlockError` in one or handing it a module half made
(`module 'tensorflow.python.data.ops.dataset_ops' has no attribute 'DatasetV2'`): the
demo race's three runs failed so, started while the warm-up imported. Each such thread
calls `load()` before its first import of the stack.

TensorFlow writes its start-up lines (oneDNN, CPU features, CUDA probing) to file
descriptor 2 before any logging setting applies, and `TF_CPP_MIN_LOG_LEVEL` quiets none
of them that matter: on a machine without an NVIDIA driver, `failed call to cuInit` is
logged as an error at every level short of 3, which hides every real error too. So
`tensorflow()` imports it with descriptor 2 caught, and writes back every line caught but
those start-up lines (`start_up_line`): a real error, a Python traceback, another
thread's line in the meantime, all still show. Setting `TF_CPP_MIN_LOG_LEVEL` leaves
TensorFlow's output to it: then every line shows.

Once imported, the stack's objects (about 400,000) are moved out of the garbage
collector's sight with `gc.freeze()`: they live as long as the process, and a full
collection that walked them took 0.19 s, with every thread stopped, at the end of each run
(`RunExecution` collects a finished run's reference cycles) and whenever Python's own
collector ran its oldest generation. After the freeze it takes microseconds.

Before TensorFlow comes in, `ast.parse` is made to parse in one thread at a time
(`core.training.ast_lock`): autograph parses every function it converts, in every run's
thread.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from core.training.ast_lock import serialize_ast_parse

#: What `load` imports, as a status names what a run waits for.
STACK = "TensorFlow"
_LOCK = threading.RLock()  # `load` holds it while `tensorflow` takes it
_loaded = False
_found_devices = False

# The start-up lines of TensorFlow's native code that say nothing to a user: absl's note
# before its logging starts, INFO lines (oneDNN, "Could not find cuda drivers", CPU
# features) and the CPU features' second line.
_START_UP = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called"
    r"|I\d{4} \d\d:\d\d:"
    r"|To enable the following instructions: "
)
_CUINIT = re.compile(r"E\d{4} \d\d:\d\d:\S+ +\d+ \S+\] failed call to cuInit")
# Where an NVIDIA driver shows itself: without one, cuInit fails as a matter of course.
_NVIDIA_DRIVER = (Path("/proc/driver/nvidia"), Path("/dev/nvidiactl"))


def start_up_line(line: str, *, nvidia_driver: bool) -> bool:
    """Whether `line`, written to descriptor 2 while TensorFlow was imported, is one of
    its start-up lines that say nothing to a user: an INFO line or its continuation, or
    a failed cuInit on a machine without an NVIDIA driver (with one, it is a real error)."""
    return bool(_START_UP.match(line)) or (not nvidia_driver and bool(_CUINIT.match(line)))


def tensorflow() -> ModuleType:
    """TensorFlow, imported, with its devices found (where CUDA is probed), its start-up
    lines kept off descriptor 2 (see the module docstring)."""
    global _found_devices
    with _LOCK:
        if not _found_devices:
            serialize_ast_parse()
            with start_up_lines_dropped():
                import tensorflow as tf

                tf.config.list_physical_devices()
            _found_devices = True
    return sys.modules["tensorflow"]


def loaded() -> bool:
    """Whether the training stack is imported whole (`load`)."""
    return _loaded


def load() -> None:
    """Imports the training stack unless it is imported already; another thread that
    imports it meanwhile waits for this one."""
    global _loaded
    if _loaded:  # set only once every module is whole
        return
    with _LOCK:
        if _loaded:  # imported (and frozen) while this thread waited: not twice
            return
        tensorflow()
        import keras

        from core.optimizers import registry
        from core.training import strategies, trainer

        # Imported for their effect; named here so that no linter's fix of "unused"
        # imports takes them away (one once dropped two of them).
        del keras, registry, strategies, trainer

        gc.collect()  # the imports' own garbage is not frozen with them
        gc.freeze()
        _loaded = True


@contextlib.contextmanager
def start_up_lines_dropped() -> Iterator[None]:
    """Inside, descriptor 2 writes to a temporary file; on the way out it points where it
    did again, and gets the lines caught but TensorFlow's start-up lines (and its other
    INFO lines: XLA's as it first compiles, which the playground's worker drops so)."""
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            lines = caught.read().decode(errors="replace").splitlines(keepends=True)
            nvidia_driver = any(path.exists() for path in _NVIDIA_DRIVER)
            kept = [line for line in lines if not start_up_line(line, nvidia_driver=nvidia_driver)]
            if kept:
                os.write(2, "".join(kept).encode())
