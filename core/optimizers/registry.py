"""Plugin optimizers: `@register`, and `build` by name.

Every optimizer the lab offers is an `OptimizerSpec` (see `core.optimizers.optimizer_catalog`, where
the built-in ones are declared). Plugins are `.py` files in the plugins folder (see
`core.optimizers.plugin_folder`, which imports them) that decorate their class with
`@register(...)`; they appear next to the built-in optimizers without touching `core`.
Importing this module imports TensorFlow, and registers the built-in classes with Keras's
serializer.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import keras

from core.optimizers import (
    algorithms,  # noqa: F401  (registers the built-in classes with Keras)
    plugin_folder,
)
from core.optimizers.lab_optimizer import LabOptimizer, documented
from core.optimizers.optimizer_catalog import (
    BUILTIN,
    BUILTIN_NAMES,
    OptimizerSpec,
    get_spec,
    plugin_errors,
    plugins_folder,
    specs,
)
from core.optimizers.plugin_folder import load_plugins, loaded_plugins, registered
from core.store.paths import PROJECT_ROOT

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
        source = getattr(sys.modules.get(cls.__module__), "__file__", None) or cls.__module__
        spec = OptimizerSpec(
            name,
            f"{cls.__module__}:{cls.__qualname__}",
            summary,
            update_rule,
            tuple(cls.knobs),
            dict(defaults or {}),
            required,
            str(source),
        )
        plugin_folder.add(spec, cls, taken=BUILTIN_NAMES)
        if keras.saving.get_registered_name(cls) == cls.__name__:
            keras.saving.register_keras_serializable(package="optlab_plugins")(cls)
        cls.__doc__ = documented(cls.__doc__, cls.knobs, [(name, update_rule)])
        return cls

    return decorate


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
    loaded = plugin_folder.registered_specs()
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
        return spec.cls is cls
    except LookupError:
        return False


def build(name: str, /, **hyperparameters: Any) -> LabOptimizer:
    """A new optimizer by registry name, e.g. `build("adamw", learning_rate=1e-3)`; a
    `name=` among the hyperparameters names the Keras object (see `OptimizerSpec.build`)."""
    return get_spec(name).build(**hyperparameters)
