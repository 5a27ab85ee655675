"""`load`: a dataset by name, read once per process and shared after that."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from core.data import bundled, files, plugin_data, registry, tfds_source
from core.data.dataset import Dataset

_BUNDLED: dict[str, Callable[[], Dataset]] = {
    "mnist-5k": bundled.load_mnist_5k,
    "digits": bundled.load_digits,
}

_CacheKey = tuple[str, str | None]
_cache: dict[_CacheKey, Dataset] = {}
_key_locks: dict[_CacheKey, threading.Lock] = {}
_cache_lock = threading.Lock()


def load(name: str = registry.DEFAULT_DATASET, *, data_dir: str | None = None) -> Dataset:
    """Loads the dataset `name`, reading it only the first time in this process.

    Loads are cached per dataset and TFDS data directory. Two threads asking for the same
    dataset at once read it once; different datasets load in parallel.

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
    root = None if info is None or info.offline else tfds_source.data_root(data_dir)
    key = (name, None if root is None else os.fspath(root))
    with _cache_lock:
        key_lock = _key_locks.setdefault(key, threading.Lock())
    # One lock per key: a second caller waits for the first load instead of repeating it.
    with key_lock:
        if key not in _cache:
            if plugin is not None:
                _cache[key] = plugin_data.load(plugin)
            elif root is None:
                _cache[key] = _BUNDLED[name]()
            else:
                tfds_name = name.removeprefix(tfds_source.PREFIX)
                _cache[key] = tfds_source.load_tfds(
                    tfds_name, root, num_classes=info.num_classes, label=name
                )
        return _cache[key]
