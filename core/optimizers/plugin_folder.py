"""The plugins folder: importing its files, and the optimizers they register in this
process (each one's spec and class), and the files that failed.

Plugins are `.py` files in the plugins folder (`OPTLAB_PLUGINS`, else `plugins/` in the
project root) that decorate their class with `@register(...)` (see
`core.optimizers.registry`, which puts them here). Only files in that folder are ever
imported. This module imports no TensorFlow itself: the plugin files do, when they load.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from core.optimizers import probe
from core.store.paths import PROJECT_ROOT

if TYPE_CHECKING:
    from core.optimizers.optimizer_catalog import OptimizerSpec

# Reentrant: a plugin file registers its optimizer while `load_plugins` imports it.
_lock = threading.RLock()
_specs: dict[str, OptimizerSpec] = {}
_classes: dict[str, type] = {}
_errors: dict[str, str] = {}  # file (or folder) → why it was not loaded
_loaded_files: set[Path] = set()


def plugins_folder() -> Path:
    """Where plugins are loaded from: `$OPTLAB_PLUGINS`, else `plugins/` in the project."""
    return Path(os.environ.get("OPTLAB_PLUGINS", PROJECT_ROOT / "plugins"))


def add(spec: OptimizerSpec, cls: type, *, taken: frozenset[str]) -> None:
    """Keeps the plugin optimizer `spec`, implemented by `cls`. Raises `ValueError` if
    its name is among `taken` (the built-in ones) or a plugin has it already."""
    with _lock:
        if spec.name in taken or spec.name in _specs:
            raise ValueError(f"an optimizer named {spec.name!r} is already registered")
        _specs[spec.name] = spec
        _classes[spec.name] = cls


def registered(name: str) -> OptimizerSpec | None:
    """The plugin optimizer `name` if a loaded plugin registered it, without looking
    through the plugins folder again."""
    with _lock:
        return _specs.get(name)


def registered_specs() -> list[OptimizerSpec]:
    """The plugin optimizers registered so far, without looking through the folder."""
    with _lock:
        return list(_specs.values())


def plugin_class(name: str) -> type:
    """The class of the plugin optimizer `name`. Raises `LookupError` if no plugin loaded
    in this process registered it."""
    with _lock:
        cls = _classes.get(name)
    if cls is None:
        raise LookupError(f"optimizer {name!r}: its plugin is not loaded in this process")
    return cls


def load_plugins(folder: Path | None = None) -> dict[str, str]:
    """Imports the `*.py` files of the plugins folder not imported yet; returns the errors.

    A plugin that fails to import (with any exception, `SystemExit` included), does not
    import in a child process within its deadline (one child for all the files; the
    deadline follows the machine's speed: see `core.optimizers.probe.DEADLINE`), or
    registers a taken name is reported by file, not raised, so one broken file never hides
    the other optimizers. A folder or file others can write to, and links, are
    refused. Files whose name starts with `_` are skipped.
    """
    folder = Path(folder) if folder is not None else plugins_folder()
    with _lock:
        if not folder.is_dir():
            return dict(_errors)
        if reason := probe.unsafe(folder):
            _errors[str(folder)] = reason
            return dict(_errors)
        new = [
            path
            for path in sorted(folder.glob("*.py"))
            if not path.name.startswith("_") and path not in _loaded_files
        ]
        _loaded_files.update(new)
        unsafe = {path: reason for path in new if (reason := probe.unsafe(path))}
        probed = probe.probe([path for path in new if path not in unsafe]) if new else {}
        for path in new:
            reason = unsafe.get(path) or probed.get(path)
            if reason is None:
                reason = _import_file(path)
            if reason is not None:
                _errors[str(path)] = reason
        return dict(_errors)


def loaded_plugins() -> tuple[list[OptimizerSpec], dict[str, str]]:
    """The plugin optimizers, after loading the plugins folder, and the files of that
    folder that failed (or the folder itself)."""
    folder = plugins_folder()
    load_plugins(folder)
    with _lock:
        errors = {
            path: reason
            for path, reason in _errors.items()
            if Path(path) == folder or Path(path).parent == folder
        }
        return list(_specs.values()), errors


def _import_file(path: Path) -> str | None:
    """Imports the plugin file; returns why it failed, or None."""
    module_name = f"optlab_plugins.{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        return f"cannot import {path}"
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs: `register` looks the module up to record the plugin's file.
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # a plugin's `sys.exit` must not end the lab
        sys.modules.pop(module_name, None)
        return "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return None
