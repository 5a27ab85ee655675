"""Datasets: a catalog, in-memory loads, and seeded `tf.data` input pipelines.

    >>> from core import data
    >>> [info.name for info in data.catalog()]
    ['mnist-5k', 'digits', 'mnist', 'fashion_mnist', 'cifar10']
    >>> dataset = data.load("mnist-5k")
    >>> batches = data.pipeline(dataset, "train", batch_size=64, seed=0, epochs=1)

A dataset's name is resolved in `names` (a file, a TFDS dataset, a built-in or a
plugin's); `dataset_catalog` describes it and `loading` loads it from there.

Importing this package does not import TensorFlow: `load` imports it only for TFDS
datasets and `pipeline` when it builds a pipeline.
"""

from core.data.builtin import DEFAULT_DATASET
from core.data.dataset import Dataset, DatasetInfo, DatasetUnavailable
from core.data.dataset_catalog import catalog
from core.data.input_pipeline import pipeline, poisson_batches
from core.data.loading import load
from core.data.plugin_data import register_dataset

__all__ = [
    "DEFAULT_DATASET",
    "Dataset",
    "DatasetInfo",
    "DatasetUnavailable",
    "catalog",
    "load",
    "pipeline",
    "poisson_batches",
    "register_dataset",
]
