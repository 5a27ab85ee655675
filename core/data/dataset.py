"""`Dataset`, the in-memory arrays every loader returns, the split they share, and
`DatasetInfo`, what a dataset is before it is loaded."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: What a dataset asks of a model: a class per example (cross-entropy, accuracy), or a
#: number (mean squared error, mean absolute error).
PROBLEMS = ("classification", "regression")


class DatasetUnavailable(RuntimeError):
    """A dataset's data is not on this machine and cannot be fetched now.

    The message says how to prepare it.
    """


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


@dataclass(frozen=True, eq=False)
class Dataset:
    """A loaded dataset: train and test arrays, held in memory.

    The arrays are read-only because loads are cached and shared between runs.

    Attributes:
        name: The catalog name it was loaded by.
        x_train, x_test: float32 images in [0, 1], shape `(N, height, width, channels)`;
            a file's features may be rows, `(N, features)` (see `core.data.files`).
        y_train, y_test: int64 labels in `0 .. num_classes - 1`, shape `(N,)`; for a
            regression, float32 targets.
        num_classes: How many labels there are; 1 for a regression (one target).
        input_shape: The shape of one example, `(height, width, channels)` for images.
        problem: `"classification"` or `"regression"` (see `PROBLEMS`).
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    input_shape: tuple[int, ...]
    problem: str = "classification"

    @property
    def nbytes(self) -> int:
        """What its arrays take in memory."""
        return sum(a.nbytes for a in (self.x_train, self.y_train, self.x_test, self.y_test))

    def split(self, split: str) -> tuple[np.ndarray, np.ndarray]:
        """The `(x, y)` arrays of `split`, `"train"` or `"test"`."""
        if split == "train":
            return self.x_train, self.y_train
        if split == "test":
            return self.x_test, self.y_test
        raise ValueError(f"split: must be 'train' or 'test' (got {split!r})")


def make_dataset(
    name: str,
    images: tuple[np.ndarray, np.ndarray],
    labels: tuple[np.ndarray, np.ndarray],
    *,
    num_classes: int,
    scale: float,
) -> Dataset:
    """Builds a read-only `Dataset` from raw train and test images and labels.

    Args:
        name: The catalog name.
        images: `(train, test)` images of shape `(N, height, width, channels)`.
        labels: `(train, test)` integer labels.
        num_classes: How many labels there are.
        scale: The largest raw pixel value; images are divided by it into [0, 1].
    """
    x_train, x_test = (frozen(np.asarray(x, np.float32) / np.float32(scale)) for x in images)
    y_train, y_test = (frozen(np.asarray(y, np.int64)) for y in labels)
    height, width, channels = x_train.shape[1:]
    return Dataset(
        name=name,
        x_train=x_train,
        y_train=y_train,
        x_test=x_test,
        y_test=y_test,
        num_classes=num_classes,
        input_shape=(height, width, channels),
    )


def stratified_split(labels: np.ndarray, *, test_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """Splits row indices per class, in file order: the last rows of each class are test.

    For each label, its rows keep the order they have in the file; the first
    `n - round(n * test_fraction)` of them go to train and the rest to test. Both index
    arrays come back in file order, so the split is fixed and needs no random seed.

    Returns:
        `(train_indices, test_indices)`.
    """
    is_test = np.zeros(len(labels), dtype=bool)
    for label in np.unique(labels):
        rows = np.flatnonzero(labels == label)
        is_test[rows[len(rows) - round(len(rows) * test_fraction) :]] = True
    return np.flatnonzero(~is_test), np.flatnonzero(is_test)


def frozen(array: np.ndarray) -> np.ndarray:
    """`array`, read-only: loads are cached and shared between runs."""
    array.flags.writeable = False
    return array
