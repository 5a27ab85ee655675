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

#: The most datasets a process keeps loaded; past it, the one used longest ago goes.
MAX_CACHED = 8

_CacheKey = tuple[str, str | None]  # the name, and the TFDS data dir resolved
_cache: dict[_CacheKey, Dataset] = {}  # in order of use, the latest last
_loading: dict[_CacheKey, threading.Lock] = {}  # a lock per load under way
_cache_lock = threading.Lock()


def load(name: str = registry.DEFAULT_DATASET, *, data_dir: str | None = None) -> Dataset:
    """Loads the dataset `name`, reading it only the first time in this process.

    Loads are cached per dataset and TFDS data directory (its resolved path: `a/../a`
    is `a`), the `MAX_CACHED` used last. Two threads asking for the same dataset at once
    read it once; different datasets load in parallel.

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
    if (cached := _cached(key)) is not None:
        return cached
    with _cache_lock:
        key_lock = _loading.setdefault(key, threading.Lock())
    # One lock per key: a second caller waits for the first load instead of repeating it.
    with key_lock:
        if (cached := _cached(key)) is not None:
            return cached
        if plugin is not None:
            dataset = plugin_data.load(plugin)
        elif root is None:
            dataset = _BUNDLED[name]()
        else:
            tfds_name = name.removeprefix(tfds_source.PREFIX)
            dataset = tfds_source.load_tfds(
                tfds_name, root, num_classes=info.num_classes, label=name
            )
        with _cache_lock:
            _cache[key] = dataset
            while len(_cache) > MAX_CACHED:
                del _cache[next(iter(_cache))]  # the one used longest ago
            _loading.pop(key, None)
        return dataset


def _cached(key: _CacheKey) -> Dataset | None:
    """The dataset cached under `key`, now the latest used; None if it is not."""
    with _cache_lock:
        dataset = _cache.pop(key, None)
        if dataset is not None:
            _cache[key] = dataset
        return dataset
