"""Models that only the bench trains: deep enough to show what telemetry costs per variable.

- `deep_mlp`: 49 hidden Dense layers of 64 units and the logits, 100 variables.
- `mixed_mlp`: 37 hidden Dense layers whose kernels are small, large and mid-size in turn
  (16 × 64, 64 × 256, 256 × 16: 1,024, 16,384 and 4,096 entries) and the logits, 76
  variables.
- `tiny_vit_8`: the tiny ViT plugin (`plugins/tiny_vit.py`) with 8 blocks, not 2.

`register()` adds them to the lab's models in this process (the bench trains in an
engine of its own process), once.
"""

from __future__ import annotations

import functools
from typing import Final

import keras

from core import models
from core.models.model_catalog import PLUGINS

DEEP_MLP: Final = "deep_mlp"
DEEP_VIT: Final = "tiny_vit_8"
MIXED_MLP: Final = "mixed_mlp"
#: Every model `register` adds: the bench's, not the lab's.
NAMES: Final = (DEEP_MLP, MIXED_MLP, DEEP_VIT)
HIDDEN_LAYERS: Final = 49
WIDTH: Final = 64
MIXED_WIDTHS: Final = (64, 256, 16) * 12
VIT_BLOCKS: Final = 8


def deep_mlp(input_shape: tuple[int, ...], num_classes: int, seed: int) -> keras.Model:
    """Flatten → `HIDDEN_LAYERS` × Dense(`WIDTH`, relu) → Dense logits; kernels seeded."""
    inputs = keras.Input(shape=input_shape, name="image")
    x = keras.layers.Flatten(name="flatten")(inputs)
    for i in range(1, HIDDEN_LAYERS + 1):
        init = keras.initializers.GlorotUniform(seed=seed * 1000 + i)
        x = keras.layers.Dense(WIDTH, "relu", kernel_initializer=init, name=f"dense{i}")(x)
    init = keras.initializers.GlorotUniform(seed=seed * 1000 + 100)
    outputs = keras.layers.Dense(num_classes, kernel_initializer=init, name="logits")(x)
    return keras.Model(inputs, outputs, name=DEEP_MLP)


def mixed_mlp(input_shape: tuple[int, ...], num_classes: int, seed: int) -> keras.Model:
    """Flatten → Dense(16) and `MIXED_WIDTHS` Dense layers (relu) → Dense logits; kernels
    seeded."""
    inputs = keras.Input(shape=input_shape, name="image")
    x = keras.layers.Flatten(name="flatten")(inputs)
    for i, width in enumerate((16, *MIXED_WIDTHS)):
        init = keras.initializers.GlorotUniform(seed=seed * 1000 + i)
        x = keras.layers.Dense(width, "relu", kernel_initializer=init, name=f"dense{i}")(x)
    init = keras.initializers.GlorotUniform(seed=seed * 1000 + 999)
    outputs = keras.layers.Dense(num_classes, kernel_initializer=init, name="logits")(x)
    return keras.Model(inputs, outputs, name=MIXED_MLP)


@functools.cache
def register() -> None:
    """Adds `deep_mlp`, `mixed_mlp` and `tiny_vit_8` to the lab's models (the plugins
    folder loaded)."""
    models.catalog(plugins=True)
    vit = PLUGINS.entry("tiny_vit")
    if vit is None:
        raise RuntimeError("the bench needs the tiny_vit plugin of plugins/tiny_vit.py")
    models.register_model(
        DEEP_MLP, description=f"{HIDDEN_LAYERS} hidden Dense layers of {WIDTH} (bench only)"
    )(deep_mlp)
    models.register_model(
        MIXED_MLP, description="37 hidden Dense layers, small, large and mid-size (bench only)"
    )(mixed_mlp)
    models.register_model(
        DEEP_VIT, description=f"The tiny ViT with {VIT_BLOCKS} blocks (bench only)", images=True
    )(functools.partial(vit.build, blocks=VIT_BLOCKS))
