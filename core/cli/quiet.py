"""TensorFlow's native lines kept off the terminal: its start-up lines
(`import_tensorflow_quietly`), and any others a command does not want (`native_output_hidden`)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from core.training import tf_import


@contextlib.contextmanager
def native_output_hidden() -> Iterator[None]:
    """Inside, file descriptor 2 points at /dev/null: TensorFlow's native lines (oneDNN,
    CPU features, CUDA probing at start-up; XLA's notes when it first compiles) are written
    there, before or beside any logging setting. Python's own errors still show: an
    exception is raised on once descriptor 2 is back. Setting `TF_CPP_MIN_LOG_LEVEL`
    leaves TensorFlow's output to it: then nothing is hidden."""
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        yield
        return
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def import_tensorflow_quietly() -> None:
    """Imports TensorFlow and finds its devices with its start-up lines kept off the
    terminal, and any other line it writes shown (`core.training.tf_import.tensorflow`,
    the one import path of core)."""
    tf_import.tensorflow()
