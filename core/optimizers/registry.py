"""Plugin optimizers: `@register`, the plugins folder, and `build` by name.

Every optimizer the lab offers is an `OptimizerSpec` (see `core.optimizers.catalog`, where
the built-in ones are declared). Plugins are `.py` files in the plugins folder
(`OPTLAB_PLUGINS`, else `plugins/` in the project root) that decorate their class with
`@register(...)`; they appear next to the built-in optimizers without touching `core`. Only
files in that folder are ever imported.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import keras

from core.optimizers import algorithms, probe
from core.optimizers.base import LabOptimizer, documented
from core.optimizers.catalog import (
    BUILTIN,
    BUILTIN_NAMES,
    PROJECT_ROOT,
    OptimizerSpec,
    Plugins,
    get_spec,
    plugin_errors,
    plugins_folder,
    specs,
)

__all__ = [
    "PROJECT_ROOT",
    "OptimizerSpec",
    "build",
    "get_spec",
    "load_model",
    "load_plugins",
    "loaded_plugins",
    "plugin_errors",
    "plugins_folder",
    "register",
    "registered",
    "spec_of",
    "specs",
]

_lock = threading.RLock()
_plugins: dict[str, OptimizerSpec] = {}
_plugin_classes: dict[str, type[LabOptimizer]] = {}
_plugin_errors: dict[str, str] = {}
_loaded_files: set[Path] = set()


def register(
    name: str,
    *,
    summary: str,
    update_rule: str,
    defaults: Mapping[str, Any] | None = None,
    required: tuple[str, ...] = (),
) -> Callable[[type[LabOptimizer]], type[LabOptimizer]]:
    """Class decorator that adds an optimizer to the registry (and to Keras's serializer).

    ```python
    @register("normalized_gd", summary="...", update_rule="x ← x − η·g/‖g‖")
    class NormalizedGD(GlobalVectorOptimizer): ...
    ```
    """

    def decorate(cls: type[LabOptimizer]) -> type[LabOptimizer]:
        if not (isinstance(cls, type) and issubclass(cls, LabOptimizer)):
            raise TypeError(f"@register({name!r}) needs a LabOptimizer subclass, got {cls!r}")
        with _lock:
            if name in BUILTIN_NAMES or name in _plugins:
                raise ValueError(f"an optimizer named {name!r} is already registered")
            if keras.saving.get_registered_name(cls) == cls.__name__:
                keras.saving.register_keras_serializable(package="optlab_plugins")(cls)
            source = getattr(sys.modules.get(cls.__module__), "__file__", None) or cls.__module__
            _plugins[name] = OptimizerSpec(
                name,
                f"{cls.__module__}:{cls.__qualname__}",
                summary,
                update_rule,
                tuple(cls.knobs),
                dict(defaults or {}),
                required,
                str(source),
            )
            _plugin_classes[name] = cls
            cls.__doc__ = documented(cls.__doc__, cls.knobs, [(name, update_rule)])
        return cls

    return decorate


def implementation(spec: OptimizerSpec) -> type[LabOptimizer]:
    """The class of `spec`: a built-in one of `algorithms`, or a loaded plugin's."""
    if spec.source == "core":
        return getattr(algorithms, spec.implementation.partition(":")[2])
    with _lock:
        cls = _plugin_classes.get(spec.name)
    if cls is None:
        raise LookupError(f"optimizer {spec.name!r}: its plugin is not loaded in this process")
    return cls


def load_plugins(folder: Path | None = None) -> dict[str, str]:
    """Imports the `*.py` files of the plugins folder not imported yet; returns the errors.

    A plugin that fails to import (with any exception, `SystemExit` included), does not
    import within `probe.PROBE_SECONDS` in a child process (one for all the files, see
    `core.optimizers.probe`), or registers a taken name is
    reported by file, not raised, so one broken file never hides the other optimizers
    (see `core.optimizers.probe`). A folder or file others can write to, and links, are
    refused. Files whose name starts with `_` are skipped.
    """
    folder = Path(folder) if folder is not None else plugins_folder()
    with _lock:
        if not folder.is_dir():
            return dict(_plugin_errors)
        if reason := probe.unsafe(folder):
            _plugin_errors[str(folder)] = reason
            return dict(_plugin_errors)
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
                _plugin_errors[str(path)] = reason
        return dict(_plugin_errors)


def loaded_plugins() -> Plugins:
    """The plugin optimizers, after loading the plugins folder, and the files of that
    folder that failed (or the folder itself)."""
    folder = plugins_folder()
    load_plugins(folder)
    with _lock:
        errors = {
            path: reason
            for path, reason in _plugin_errors.items()
            if Path(path) == folder or Path(path).parent == folder
        }
        return list(_plugins.values()), errors


def registered(name: str) -> OptimizerSpec | None:
    """The plugin optimizer `name` if a loaded plugin registered it, without looking
    through the plugins folder again."""
    with _lock:
        return _plugins.get(name)


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


def load_model(path: str | Path, **kwargs: Any) -> keras.Model:
    """`keras.models.load_model(path, **kwargs)` for a model saved with one of the lab's
    optimizers inside: the built-in classes are registered with Keras's serializer by
    this module's imports, and the plugins' by loading the plugins folder first."""
    load_plugins()
    return keras.models.load_model(path, **kwargs)


def spec_of(optimizer: Any) -> OptimizerSpec | None:
    """The lab optimizer `optimizer` is an instance of, by its class and knob values: of
    the specs of its class, the one whose own defaults (besides the learning rate) it has
    most of, e.g. adamw for an Adam with weight decay 0.004. None for any other optimizer.
    Plugins count once loaded (this looks through no folder)."""
    if not isinstance(optimizer, LabOptimizer):
        return None
    with _lock:
        loaded = list(_plugins.values())
    candidates = [s for s in (*BUILTIN, *loaded) if _implements(s, type(optimizer))]

    def matched(spec: OptimizerSpec) -> int:
        own = {k: v for k, v in spec.defaults.items() if k != "learning_rate"}
        if any(optimizer.get_knob(k) != v for k, v in own.items()):
            return -1
        return len(own)

    best = max(candidates, key=matched, default=None)
    return best if best is not None and matched(best) >= 0 else None


def _implements(spec: OptimizerSpec, cls: type) -> bool:
    try:
        return implementation(spec) is cls
    except LookupError:
        return False


def build(name: str, /, **hyperparameters: Any) -> LabOptimizer:
    """A new optimizer by registry name, e.g. `build("adamw", learning_rate=1e-3)`; a
    `name=` among the hyperparameters names the Keras object (see `OptimizerSpec.build`)."""
    return get_spec(name).build(**hyperparameters)
