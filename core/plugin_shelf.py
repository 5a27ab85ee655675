"""`Shelf`: the models or the datasets that plugins add, as every process sees them.

Plugin files in the plugins folder (see `core.optimizers.registry.load_plugins`, which
imports them) put entries on a shelf with `@register_model` or `@register_dataset`. Each
entry has an info (`ModelInfo`, `DatasetInfo`: what forms, the CLI and validation need)
made from it by `describe`. A process that must never import TensorFlow, the dashboard,
takes the infos from a `source` instead: the engine process publishes them in the store.

Pure Python: only loading the plugins folder imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar

Entry = TypeVar("Entry")
Info = TypeVar("Info")

#: Published infos, each as `dataclasses.asdict` gives it, and the entries that failed.
Published = tuple[list[dict[str, Any]], dict[str, str]]


class Shelf(Generic[Entry, Info]):
    """The entries of one kind that plugins registered, and their infos.

    Args:
        kind: `"model"` or `"dataset"`: the run field that names them.
        info_type: The info dataclass; a published info is read back as `info_type(**d)`.
        describe: An entry's info; may fail (a dataset that cannot load), which is then
            reported by the entry's file, and the entry left out.
        builtin: The built-in names, which a plugin cannot take.
    """

    def __init__(
        self,
        kind: str,
        info_type: type[Info],
        describe: Callable[[Entry], Info],
        builtin: frozenset[str],
    ) -> None:
        self.kind = kind
        self._info_type = info_type
        self._describe = describe
        self._builtin = builtin
        self._entries: dict[str, tuple[Entry, str]] = {}  # name → (entry, its file)
        self._infos: dict[str, Info] = {}
        self._failed: dict[str, tuple[str, str]] = {}  # name → (its file, why no info)
        self._source: Callable[[], Published] | None = None
        self._lock = threading.RLock()

    def add(self, name: str, entry: Entry, source: str) -> None:
        """Puts `entry` on the shelf as `name`, registered by the file `source`.
        Raises `ValueError` if the name is taken."""
        if not isinstance(name, str) or not name.strip() or ":" in name:
            raise ValueError(f"a {self.kind}'s name must be a non-empty text without ':'")
        with self._lock:
            if name in self._builtin or name in self._entries:
                raise ValueError(f"a {self.kind} named {name!r} is already registered")
            self._entries[name] = (entry, source)

    def entry(self, name: str) -> Entry | None:
        """The entry `name` as registered in this process (loading the plugins folder
        first if it is not there), None if no plugin registered it."""
        with self._lock:
            found = self._entries.get(name)
        if found is None:
            _load_plugins()  # outside the lock: a plugin file adds while it loads
            with self._lock:
                found = self._entries.get(name)
        return None if found is None else found[0]

    def use_source(self, source: Callable[[], Published] | None) -> None:
        """Take the infos from `source()` instead of the plugins folder (None: load the
        folder again). For a process that must never import TensorFlow."""
        with self._lock:
            self._source = source

    def published(self) -> Published:
        """The infos of every entry, and the entries whose info failed by their file:
        what `use_source` takes in another process."""
        infos, errors = self._all()
        return [dataclasses.asdict(info) for info in infos.values()], errors

    def infos(self) -> list[Info]:
        """The info of every entry that has one, in the order they were registered."""
        return list(self._all()[0].values())

    def errors(self) -> dict[str, str]:
        """`{file: why}` for the entries whose info could not be made."""
        return self._all()[1]

    def info(self, name: str) -> Info | None:
        """The info of the entry `name`, None if no plugin has it. Raises `ValueError`
        naming the field (`model`, `dataset`) when a plugin has it but its info failed."""
        with self._lock:
            known = self._infos.get(name)
        if known is not None:
            return known
        infos, _ = self._all()
        with self._lock:
            failed = self._failed.get(name)
        if failed is not None:
            raise ValueError(f"{self.kind}: the plugin's {name!r} failed: {failed[1]}")
        return infos.get(name)

    def _all(self) -> tuple[dict[str, Info], dict[str, str]]:
        with self._lock:
            source = self._source
        if source is not None:
            described, errors = source()
            infos = [self._info_type(**_tuples(d)) for d in described]
            return {info.name: info for info in infos}, errors  # type: ignore[attr-defined]
        _load_plugins()
        with self._lock:
            for name, (entry, path) in self._entries.items():
                if name in self._infos or name in self._failed:
                    continue
                try:
                    self._infos[name] = self._describe(entry)
                except Exception as exc:  # a plugin's own code: reported, never fatal
                    self._failed[name] = (path, self._reason(exc))
            # The plugins folder's, as the optimizers' errors are: a test, or a process
            # that loaded another folder, keeps its entries but not its complaints.
            folder = _plugins_folder()
            errors = {
                path: f"{self.kind} {name!r}: {why}"
                for name, (path, why) in self._failed.items()
                if Path(path).parent == folder
            }
            return dict(self._infos), errors

    def _reason(self, exc: Exception) -> str:
        """Why an entry failed: a `ValueError` naming the field says it in words."""
        if isinstance(exc, ValueError) and str(exc).startswith(f"{self.kind}: "):
            return str(exc).removeprefix(f"{self.kind}: ")
        return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def source_file(function: Callable[..., Any]) -> str:
    """The file of the plugin that defines `function` (its module's name if unknown)."""
    module = function.__module__
    return str(getattr(sys.modules.get(module), "__file__", None) or module)


def _tuples(described: Mapping[str, Any]) -> dict[str, Any]:
    """JSON has lists only: an info's shapes are tuples."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in described.items()}


def _plugins_folder() -> Path:
    from core.optimizers.optimizer_catalog import plugins_folder as folder

    return folder()


def _load_plugins() -> None:
    from core.optimizers import registry  # imports TensorFlow

    registry.load_plugins()
