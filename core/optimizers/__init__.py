"""The lab's optimizers, usable in any Keras 3 program.

```python
from core import optimizers

optimizer = optimizers.build("adamw", learning_rate=1e-3, radius=50.0, clip_norm=1.0)
model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy")
```

`specs()` describes every optimizer and knob; `lab_optimizer.py` documents the order the knobs act
in; `GlobalVectorOptimizer` is the base for algorithms on the flattened parameter vector,
and `register` adds one from a file in `plugins/`.

Names are imported on first use: `core.optimizers.optimizer_catalog` (names, knobs, validation)
never imports TensorFlow, so the dashboard and `--help` stay light; the optimizer classes,
`build` and `register` do. Once Keras is imported too (before this package or after), every
optimizer class, the plugins' included, is registered with Keras's serializer, as Keras's
own are: `keras.models.load_model` then reads a model saved with one inside.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from core.after_import import when_imported

_HOMES = {
    "COMMON_KNOBS": "core.optimizers.stages",
    "InvalidInput": "core.knobs",
    "InvalidHyperparameters": "core.knobs",  # its former name
    "Knob": "core.knobs",
    "LayerRule": "core.knobs",
    "SGD": "core.optimizers.algorithms",
    "Adam": "core.optimizers.algorithms",
    "Momentum": "core.optimizers.algorithms",
    "SCALAR_STATS": "core.optimizers.lab_optimizer",
    "VECTOR_STATS": "core.optimizers.lab_optimizer",
    "LabOptimizer": "core.optimizers.lab_optimizer",
    "GlobalVectorOptimizer": "core.optimizers.global_vector",
    "OptimizerSpec": "core.optimizers.optimizer_catalog",
    "get_spec": "core.optimizers.optimizer_catalog",
    "plugin_errors": "core.optimizers.optimizer_catalog",
    "plugins_folder": "core.optimizers.plugin_folder",
    "specs": "core.optimizers.optimizer_catalog",
    "build": "core.optimizers.registry",
    "load_model": "core.optimizers.registry",
    "load_plugins": "core.optimizers.plugin_folder",
    "register": "core.optimizers.registry",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'core.optimizers' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _register_with_keras() -> None:
    """Registers every optimizer class with Keras's serializer: the built-in ones (their
    module's decorators) and the plugins' (loading the plugins folder, unless this process
    is the probe that tries a plugin file: it would probe again, and again). Nothing when
    Keras is being imported by one of these modules, which the classes need whole: that
    import registers the built-in classes as it ends, and the lab loads the plugins where
    it needs them."""
    if any(
        getattr(module.__spec__, "_initializing", False)  # how importlib tells a half-made one
        for name, module in list(sys.modules.items())
        if name.startswith(f"{__name__}.") and getattr(module, "__spec__", None) is not None
    ):
        return
    importlib.import_module(f"{__name__}.algorithms")
    if not os.environ.get(importlib.import_module(f"{__name__}.probe").PROBING_VAR):
        importlib.import_module(f"{__name__}.plugin_folder").load_plugins()


when_imported("keras", _register_with_keras)
