"""The lab's optimizers, usable in any Keras 3 program.

```python
from core import optimizers

optimizer = optimizers.build("adamw", learning_rate=1e-3, radius=50.0, clip_norm=1.0)
model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy")
```

`specs()` describes every optimizer and knob; `base.py` documents the order the knobs act
in; `GlobalVectorOptimizer` is the base for algorithms on the flattened parameter vector,
and `register` adds one from a file in `plugins/`.

Names are imported on first use: `core.optimizers.catalog` (names, knobs, validation)
never imports TensorFlow, so the dashboard and `--help` stay light; the optimizer classes,
`build` and `register` do.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "COMMON_KNOBS": "core.optimizers.stages",
    "InvalidInput": "core.knobs",
    "InvalidHyperparameters": "core.knobs",  # its former name
    "Knob": "core.knobs",
    "LayerRule": "core.knobs",
    "SGD": "core.optimizers.algorithms",
    "Adam": "core.optimizers.algorithms",
    "Momentum": "core.optimizers.algorithms",
    "SCALAR_STATS": "core.optimizers.base",
    "VECTOR_STATS": "core.optimizers.base",
    "LabOptimizer": "core.optimizers.base",
    "GlobalVectorOptimizer": "core.optimizers.global_vector",
    "OptimizerSpec": "core.optimizers.catalog",
    "get_spec": "core.optimizers.catalog",
    "plugin_errors": "core.optimizers.catalog",
    "plugins_folder": "core.optimizers.plugin_folder",
    "specs": "core.optimizers.catalog",
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
