"""Datasets: a catalog, in-memory loads, and seeded `tf.data` input pipelines.

    >>> from core import data
    >>> [info.name for info in data.catalog()]
    ['mnist-5k', 'digits', 'mnist', 'fashion_mnist', 'cifar10']
    >>> dataset = data.load("mnist-5k")
    >>> batches = data.pipeline(dataset, "train", batch_size=64, seed=0, epochs=1)

Importing this package does not import TensorFlow: `load` imports it only for TFDS
datasets and `pipeline` when it builds a pipeline.
"""

from core.data.dataset import Dataset, DatasetUnavailable
from core.data.input_pipeline import pipeline
from core.data.loading import load
from core.data.registry import DEFAULT_DATASET, DatasetInfo, catalog, register_dataset

__all__ = [
    "DEFAULT_DATASET",
    "Dataset",
    "DatasetInfo",
    "DatasetUnavailable",
    "catalog",
    "load",
    "pipeline",
    "register_dataset",
]
