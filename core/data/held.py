"""`Held`: the datasets a process keeps loaded, bounded by the bytes of their arrays.

Every dataset a process loads (a file's, a bundled one, a plugin's, a TFDS one) is kept,
so that runs on it share one copy and a second run does not read it again. A file may
hold up to `files.MAX_LOADED_BYTES` of arrays, and a shared store's users name any file
of its uploads: so the datasets kept are bounded by their bytes, not their count, the
one used longest ago going first. A run still holds the dataset it trains on, kept or
not.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

from core.data.dataset import Dataset


class Held:
    """Datasets by key, the one used last last, at most `max_bytes` of arrays together
    (the one just kept stays, whatever its size). Safe to use from many threads."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._datasets: OrderedDict[Hashable, Dataset] = OrderedDict()
        self._lock = threading.Lock()
        self._reading: dict[Hashable, threading.Lock] = {}  # a lock per read under way

    def get(self, key: Hashable) -> Dataset | None:
        """The dataset kept under `key`, now the one used last; None if none is."""
        with self._lock:
            if key not in self._datasets:
                return None
            self._datasets.move_to_end(key)
            return self._datasets[key]

    def put(self, key: Hashable, dataset: Dataset) -> None:
        """Keeps `dataset` under `key`, and lets go of those used longest ago while the
        arrays kept take more than `max_bytes`."""
        with self._lock:
            self._datasets[key] = dataset
            self._datasets.move_to_end(key)
            held = sum(kept.nbytes for kept in self._datasets.values())
            while held > self.max_bytes and len(self._datasets) > 1:
                _, dropped = self._datasets.popitem(last=False)
                held -= dropped.nbytes

    def load(self, key: Hashable, read: Callable[[], Dataset]) -> Dataset:
        """The dataset kept under `key`, read by `read()` and kept if none is. Two threads
        asking for one key at once read it once; different keys read in parallel."""
        if (kept := self.get(key)) is not None:
            return kept
        with self._lock:
            key_lock = self._reading.setdefault(key, threading.Lock())
        # One lock per key: a second caller waits for the first read instead of repeating it.
        try:
            with key_lock:
                if (kept := self.get(key)) is not None:
                    return kept
                dataset = read()
                self.put(key, dataset)
                return dataset
        finally:
            with self._lock:  # a failed read leaves no lock behind either
                self._reading.pop(key, None)

    def by_use(self) -> list[Hashable]:
        """The keys kept, the one used longest ago first."""
        with self._lock:
            return list(self._datasets)

    def clear(self) -> None:
        with self._lock:
            self._datasets.clear()


#: What the datasets a process keeps take at most: as much as one file's may.
MAX_HELD_BYTES = 2 * 2**30
#: The datasets this process keeps loaded (`core.data.loading`, `core.data.files`,
#: `core.data.plugin_data`).
KEPT = Held(MAX_HELD_BYTES)
