"""`import_tensorflow_quietly`: TensorFlow's native start-up lines kept off the terminal."""

from __future__ import annotations

import os


def import_tensorflow_quietly() -> None:
    """Imports TensorFlow and finds its devices with the native start-up lines (oneDNN,
    CPU features, CUDA probing: written to file descriptor 2 before any logging setting
    applies) kept off the terminal. Python's own errors still show. Setting
    `TF_CPP_MIN_LOG_LEVEL` leaves TensorFlow's output to it: then only the import."""
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        _import_tensorflow()
        return
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        _import_tensorflow()
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _import_tensorflow() -> None:
    import tensorflow as tf

    tf.config.list_physical_devices()
