"""A plugin's dataset (`@register_dataset`), read into a checked `Dataset`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from core.data import files
from core.data.dataset import Dataset
from core.data.registry import PluginDataset


def load(plugin: PluginDataset) -> Dataset:
    """Calls the plugin's function and checks what it returns, as a file is checked.
    Raises `BadDataFile` (a `ValueError` naming `dataset`) saying what is wrong."""
    arrays = _arrays(plugin.name, plugin.load())
    return files.from_arrays(plugin.name, arrays, problem=plugin.problem)


def _arrays(name: str, splits: Any) -> dict[str, np.ndarray]:
    if isinstance(splits, Mapping):
        missing = [key for key in files.ARRAYS if key not in splits]
        if missing:
            raise files.BadDataFile(f"dataset: {name} lacks {', '.join(missing)}")
        return {key: np.asarray(splits[key]) for key in files.ARRAYS}
    if isinstance(splits, tuple) and len(splits) == len(files.ARRAYS):
        return {key: np.asarray(array) for key, array in zip(files.ARRAYS, splits, strict=True)}
    if isinstance(splits, tuple) and len(splits) == 2 and all(map(_is_tf_data, splits)):
        (x_train, y_train), (x_test, y_test) = (_read(split) for split in splits)
        return {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}
    raise files.BadDataFile(
        f"dataset: {name}'s function returned {type(splits).__name__}; it must return "
        "x_train, y_train, x_test and y_test (a mapping or a tuple), or (train, test) "
        "tf.data datasets of (x, y)"
    )


def _is_tf_data(split: Any) -> bool:
    return type(split).__module__.startswith("tensorflow") and hasattr(split, "element_spec")


def _read(split: Any) -> tuple[np.ndarray, np.ndarray]:
    """A `tf.data` split of `(x, y)` examples, batched or not, as two arrays. An example's
    label is one number (a class, or a regression's target), so labels with a dimension
    are a batch's, whether its size is known (`drop_remainder=True`) or not."""
    xs, ys = [], []
    batched = len(split.element_spec[1].shape) > 0
    for x, y in split.as_numpy_iterator():
        xs.append(x if batched else x[np.newaxis])
        ys.append(np.reshape(y, (-1,)))
    return np.concatenate(xs), np.concatenate(ys)
