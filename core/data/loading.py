"""`load`: a dataset by name, read once per process and shared after that."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from core.data import bundled, files, plugin_data, registry, tfds_source
from core.data.dataset import Dataset
from core.data.held import KEPT

_BUNDLED: dict[str, Callable[[], Dataset]] = {
    "mnist-5k": bundled.load_mnist_5k,
    "digits": bundled.load_digits,
}

_Key = tuple[str, str | None]  # the name, and the TFDS data dir resolved
_loading: dict[_Key, threading.Lock] = {}  # a lock per load under way
_loading_lock = threading.Lock()


def load(name: str = registry.DEFAULT_DATASET, *, data_dir: str | None = None) -> Dataset:
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
    if files.is_file(name):
        return files.load(name)  # cached by the file's identity, not its name
    builtin = name in {d.name for d in registry.catalog()}
    by_tfds_name = tfds_source.is_tfds(name)
    plugin = None if builtin or by_tfds_name else registry.PLUGINS.entry(name)
    info = None if plugin is not None else registry.info(name, data_dir=data_dir)
    root = None if info is None or info.offline else tfds_source.data_root(data_dir).resolve()
    key = (name, None if root is None else os.fspath(root))
    if (kept := KEPT.get(key)) is not None:
        return kept
    with _loading_lock:
        key_lock = _loading.setdefault(key, threading.Lock())
    # One lock per key: a second caller waits for the first load instead of repeating it.
    try:
        with key_lock:
            if (kept := KEPT.get(key)) is not None:
                return kept
            if plugin is not None:
                dataset = plugin_data.load(plugin)
            elif root is None:
                dataset = _BUNDLED[name]()
            else:
                tfds_name = name.removeprefix(tfds_source.PREFIX)
                dataset = tfds_source.load_tfds(
                    tfds_name, root, num_classes=info.num_classes, label=name
                )
            KEPT.put(key, dataset)
            return dataset
    finally:
        with _loading_lock:  # a failed load leaves no lock behind either
            _loading.pop(key, None)
