"""The plugins' datasets (`@register_dataset`): the shelf they are put on, and each one
read into a checked `Dataset`, once per process."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.data import files
from core.data.builtin import BY_NAME
from core.data.dataset import PROBLEMS, Dataset, DatasetInfo
from core.data.held import KEPT
from core.plugin_shelf import Shelf, source_file

#: A plugin's dataset: a function of no arguments returning its splits (see
#: `register_dataset`).
DatasetLoader = Callable[[], Any]


@dataclass(frozen=True)
class PluginDataset:
    """A dataset as a plugin registered it: its function, not yet called."""

    name: str
    description: str
    load: DatasetLoader
    source: str
    problem: str = "classification"


def load(plugin: PluginDataset) -> Dataset:
    """The plugin's dataset, kept (see `core.data.held`) after the first call of its
    function, whose result is checked as a file is. Raises `BadDataFile` (a `ValueError`
    naming `dataset`) saying what is wrong."""
    return KEPT.load((plugin.name, None), lambda: _checked(plugin))


def describe(plugin: PluginDataset) -> DatasetInfo:
    """A plugin dataset's info: its shapes and sizes, read by loading it (once)."""
    dataset = load(plugin)
    return DatasetInfo(
        plugin.name,
        f"{plugin.description} ({len(dataset.x_train):,} train / {len(dataset.x_test):,} test)",
        dataset.input_shape,
        dataset.num_classes,
        len(dataset.x_train),
        offline=True,
        source=plugin.source,
        problem=dataset.problem,
    )


#: The datasets the plugins registered (a built-in's name is not theirs to take).
PLUGINS: Shelf[PluginDataset, DatasetInfo] = Shelf(
    "dataset", DatasetInfo, describe, frozenset(BY_NAME)
)


def register_dataset(
    name: str, *, description: str, problem: str = "classification"
) -> Callable[[DatasetLoader], DatasetLoader]:
    """Function decorator that adds a dataset to the lab, from a file in the plugins folder.

    ```python
    @register_dataset("wine", description="...")
    def wine(): return {"x_train": ..., "y_train": ..., "x_test": ..., "y_test": ...}
    ```

    The function takes no arguments and returns the four arrays, as a mapping with those
    keys or the tuple `(x_train, y_train, x_test, y_test)`, or two `tf.data.Dataset`s
    `(train, test)` of `(x, y)` examples (batched or not), read into memory once. Features
    are images `(N, height, width[, channels])` or rows `(N, features)`, labels the
    integers `0 .. K − 1`, or with `problem="regression"` one number per example (a run
    then minimizes the mean squared error and reports the mean absolute error); they are
    checked as a file's are (see `core.data.files`).
    """
    if problem not in PROBLEMS:
        raise ValueError(f"problem: must be one of {', '.join(PROBLEMS)} (got {problem!r})")

    def decorate(load: DatasetLoader) -> DatasetLoader:
        if not callable(load):
            raise TypeError(f"@register_dataset({name!r}) needs a function, got {load!r}")
        source = source_file(load)
        plugin = PluginDataset(name, str(description), load, source, problem)
        PLUGINS.add(name, plugin, source)
        return load

    return decorate


def _checked(plugin: PluginDataset) -> Dataset:
    """Calls the plugin's function and checks what it returns, as a file is checked."""
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
