"""`load`: a dataset by name, read once per process and shared after that."""

from __future__ import annotations

import functools
import os

from core.data import bundled, dataset_catalog, files, plugin_data, synthetic, tfds_source
from core.data.builtin import DEFAULT_DATASET
from core.data.dataset import Dataset
from core.data.held import KEPT
from core.data.names import Kind, resolve


def load(name: str = DEFAULT_DATASET, *, data_dir: str | None = None) -> Dataset:
    """Loads the dataset `name`, reading it only the first time in this process.

    Loads are kept per dataset and TFDS data directory (its resolved path: `a/../a` is
    `a`), those used last, up to `held.MAX_HELD_BYTES` with the files' (see
    `core.data.held`). Two threads asking for the same dataset at once read it once;
    different datasets load in parallel.

    Args:
        name: A name from `catalog()`, a plugin's dataset, a file's (`npz:PATH`), or a
            prepared TFDS dataset's (`tfds:NAME`).
        data_dir: The TFDS data directory for `mnist`, `fashion_mnist`, `cifar10` and
            `tfds:NAME` (default: `$TFDS_DATA_DIR`, else `~/tensorflow_datasets`). Ignored by the
            datasets that ship offline.

    Raises:
        ValueError: `name` is not in the catalog; the message names the field `dataset`.
        DatasetUnavailable: A TFDS dataset is not prepared and cannot be downloaded now.
    """
    source = resolve(name, data_dir=data_dir)
    match source.kind:
        case Kind.FILE:
            return files.load(name)  # kept by the file's identity, not its name
        case Kind.PLUGIN:
            plugin = plugin_data.PLUGINS.entry(name) if isinstance(name, str) else None
            if plugin is None:
                raise dataset_catalog.unknown(name)
            return plugin_data.load(plugin)  # kept by its name
        case Kind.BUNDLED:
            offline = bundled.LOADERS.get(name) or synthetic.LOADERS[name]
            return KEPT.load((name, None), offline)
        case Kind.TFDS:
            assert source.root is not None and source.tfds_name is not None
            num_classes = dataset_catalog.info(name, data_dir=data_dir).num_classes
            root = source.root.resolve()
            read = functools.partial(
                tfds_source.load_tfds, source.tfds_name, root, num_classes=num_classes, label=name
            )
            return KEPT.load((name, os.fspath(root)), read)
