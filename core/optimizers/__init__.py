"""The lab's optimizers, usable in any Keras 3 program.

```python
from core import optimizers

optimizer = optimizers.build("adamw", learning_rate=1e-3, radius=50.0, clip_norm=1.0)
model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy")
```

`specs()` describes every optimizer and knob; `base.py` documents the order the knobs act
in; `GlobalVectorOptimizer` is the base for algorithms on the flattened parameter vector,
and `register` adds one from a file in `plugins/`.
"""

from core.knobs import COMMON_KNOBS, InvalidHyperparameters, Knob, LayerRule
from core.optimizers.algorithms import SGD, Adam, Momentum
from core.optimizers.base import SCALAR_STATS, VECTOR_STATS, LabOptimizer
from core.optimizers.global_vector import GlobalVectorOptimizer
from core.optimizers.registry import (
    OptimizerSpec,
    build,
    get_spec,
    load_plugins,
    plugin_errors,
    plugins_folder,
    register,
    specs,
)

__all__ = [
    "COMMON_KNOBS",
    "SCALAR_STATS",
    "SGD",
    "VECTOR_STATS",
    "Adam",
    "GlobalVectorOptimizer",
    "InvalidHyperparameters",
    "Knob",
    "LabOptimizer",
    "LayerRule",
    "Momentum",
    "OptimizerSpec",
    "build",
    "get_spec",
    "load_plugins",
    "plugin_errors",
    "plugins_folder",
    "register",
    "specs",
]
