"""`when_imported(name, then)`: run `then` once the module `name` is imported, now if it
already is, else right after whoever imports it first (a post-import hook, as `wrapt`'s).

It lets a light module arrange work that needs a heavy one without importing it: the lab's
optimizer classes register with Keras's serializer as soon as Keras is there, while a
process that never imports Keras (the dashboard, the CLI's `--help`) never pays for it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

_lock = threading.Lock()


def when_imported(name: str, then: Callable[[], None]) -> None:
    """Calls `then()` once the top-level module `name` has been imported: at once if it
    is in `sys.modules`, else right after its first import ends (in that thread)."""
    with _lock:
        if name not in sys.modules:
            sys.meta_path.insert(0, _Watch(name, then))
            return
    then()


class _Watch(importlib.abc.MetaPathFinder):
    """Finds nothing itself: hands the import of `name` to the other finders, with a
    loader that calls `then` after the module has run; then leaves `sys.meta_path`."""

    def __init__(self, name: str, then: Callable[[], None]) -> None:
        self.name, self.then = name, then

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        with _lock:
            if self not in sys.meta_path:
                return None
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenLoader(spec.loader, self.then)
        return spec


class _ThenLoader(importlib.abc.Loader):
    """`loader`, and `then()` once it has executed the module, which then names `loader`
    as its own again; anything else asked meanwhile (resources, source) `loader` answers."""

    def __init__(self, loader: importlib.abc.Loader, then: Callable[[], None]) -> None:
        self._loader, self._then = loader, then

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._then()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)
