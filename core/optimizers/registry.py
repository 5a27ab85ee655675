"""The optimizer registry: names → specs, `build`, and optimizers from `plugins/`.

Every optimizer the lab offers is an `OptimizerSpec`: a class, the defaults that make it
this optimizer (`adamw` is `Adam` with a weight decay), a summary and its update rule.
Plugins are `.py` files in a plugins folder (`OPTLAB_PLUGINS`, else `plugins/` in the
project root) that decorate their class with `@register(...)`; they appear next to the
built-in optimizers without touching `core`. Only files in that folder are ever imported.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import keras

from core.knobs import InvalidHyperparameters, Knob, validate
from core.optimizers.algorithms import SGD, Adam, Momentum
from core.optimizers.base import LabOptimizer

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class OptimizerSpec:
    """Everything the lab knows about one named optimizer.

    Attributes:
        name: The registry name, e.g. `"adamw"`.
        cls: The `LabOptimizer` subclass that implements it.
        summary: One sentence for a menu.
        update_rule: The update rule, in plain text with Unicode math.
        defaults: Knob defaults that differ from the class's (what makes `adamw` AdamW).
        required: Knobs that must not be `None` for this optimizer (`projected_gd`: radius).
        source: `"core"`, or the plugin file that registered it.
    """

    name: str
    cls: type[LabOptimizer]
    summary: str
    update_rule: str
    defaults: Mapping[str, Any] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    source: str = "core"

    @property
    def knobs(self) -> tuple[Knob, ...]:
        """The class's knobs with this optimizer's defaults."""
        return tuple(
            knob.with_default(self.defaults[knob.name]) if knob.name in self.defaults else knob
            for knob in self.cls.knobs
        )

    def validate(self, hyperparameters: Mapping[str, Any]) -> dict[str, Any]:
        """Every knob's value after validation; raises `InvalidHyperparameters`."""
        values = validate(self.knobs, hyperparameters, owner=self.name)
        missing = {
            name: f"is required by {self.name}" for name in self.required if values[name] is None
        }
        if missing:
            raise InvalidHyperparameters(missing)
        return values

    def build(self, **hyperparameters: Any) -> LabOptimizer:
        """A new optimizer with these hyperparameters (the rest take their defaults)."""
        return self.cls(**self.validate(hyperparameters))

    def describe(self) -> dict[str, Any]:
        """A JSON-ready description, for forms and documentation."""
        return {
            "name": self.name,
            "summary": self.summary,
            "update_rule": self.update_rule,
            "source": self.source,
            "knobs": [
                {
                    **knob.__dict__,
                    "range": knob.range_text(),
                    "required": knob.name in self.required,
                }
                for knob in self.knobs
            ],
        }


_BUILTIN = (
    OptimizerSpec(
        "sgd",
        SGD,
        "Plain gradient descent.",
        "θ ← θ − η·g",
    ),
    OptimizerSpec(
        "momentum",
        Momentum,
        "Gradient descent with heavy-ball or Nesterov momentum.",
        "v ← μ·v − η·g;  θ ← θ + v",
    ),
    OptimizerSpec(
        "adam",
        Adam,
        "Adam: per-parameter steps from running moments of g and g².",
        "m ← β₁m + (1−β₁)g;  v ← β₂v + (1−β₂)g²;  θ ← θ − η·√(1−β₂ᵗ)/(1−β₁ᵗ)·m/(√v + ε)",
        defaults={"learning_rate": 0.001},
    ),
    OptimizerSpec(
        "adamw",
        Adam,
        "Adam with decoupled weight decay (Loshchilov & Hutter), as Keras's AdamW.",
        "θ ← θ − η·λ·θ;  then the Adam step",
        defaults={"learning_rate": 0.001, "weight_decay": 0.004},
    ),
    OptimizerSpec(
        "clipped_adam",
        Adam,
        "Adam on gradients clipped to a global norm.",
        "g ← g·min(1, c/‖g‖);  then the Adam step",
        defaults={"learning_rate": 0.001, "clip_norm": 1.0},
    ),
    OptimizerSpec(
        "projected_gd",
        SGD,
        "Gradient descent, then projection of all parameters onto an L2 ball (the article's "
        "TestGD).",
        "θ ← θ − η·g;  θ ← θ·min(1, r/‖θ‖)",
        defaults={"radius": 1.0},
        required=("radius",),
    ),
)

_lock = threading.RLock()
_registry: dict[str, OptimizerSpec] = {spec.name: spec for spec in _BUILTIN}
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
            if name in _registry:
                raise ValueError(f"an optimizer named {name!r} is already registered")
            if keras.saving.get_registered_name(cls) == cls.__name__:
                keras.saving.register_keras_serializable(package="optlab_plugins")(cls)
            source = getattr(sys.modules.get(cls.__module__), "__file__", None) or cls.__module__
            _registry[name] = OptimizerSpec(
                name, cls, summary, update_rule, dict(defaults or {}), required, str(source)
            )
        return cls

    return decorate


def plugins_folder() -> Path:
    """Where plugins are loaded from: `$OPTLAB_PLUGINS`, else `plugins/` in the project."""
    return Path(os.environ.get("OPTLAB_PLUGINS", PROJECT_ROOT / "plugins"))


def load_plugins(folder: Path | None = None) -> dict[str, str]:
    """Imports the `*.py` files of the plugins folder not imported yet; returns the errors.

    A plugin that fails to import (or registers a taken name) is reported by file, not
    raised, so one broken file never hides the other optimizers. Files whose name starts
    with `_` are skipped.
    """
    folder = Path(folder) if folder is not None else plugins_folder()
    with _lock:
        for path in sorted(folder.glob("*.py")) if folder.is_dir() else []:
            path = path.resolve()
            if path.name.startswith("_") or path in _loaded_files:
                continue
            _loaded_files.add(path)
            try:
                _import_file(path)
            except Exception as exc:
                _plugin_errors[str(path)] = "".join(
                    traceback.format_exception_only(type(exc), exc)
                ).strip()
        return dict(_plugin_errors)


def _import_file(path: Path) -> None:
    module_name = f"optlab_plugins.{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs: `register` looks the module up to record the plugin's file.
    sys.modules[module_name] = module
    spec.loader.exec_module(module)


def plugin_errors() -> dict[str, str]:
    """The plugin files that failed to load, with the reason."""
    load_plugins()
    with _lock:
        return dict(_plugin_errors)


def specs() -> list[OptimizerSpec]:
    """Every optimizer: the built-in ones first, then plugins."""
    load_plugins()
    with _lock:
        return list(_registry.values())


def get_spec(name: str) -> OptimizerSpec:
    """The spec named `name`; raises `InvalidHyperparameters` naming `optimizer` if none."""
    load_plugins()
    with _lock:
        spec = _registry.get(name)
        if spec is None:
            known = ", ".join(_registry)
            raise InvalidHyperparameters(
                {"optimizer": f"unknown optimizer {name!r} (known: {known})"}
            )
        return spec


def build(name: str, **hyperparameters: Any) -> LabOptimizer:
    """A new optimizer by registry name, e.g. `build("adamw", learning_rate=1e-3)`."""
    return get_spec(name).build(**hyperparameters)
