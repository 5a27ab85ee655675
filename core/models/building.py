"""`build`: a seeded, built Keras model from a catalog name."""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING

from core.models import registry

if TYPE_CHECKING:
    import keras

# Head kernels are numbered after every body layer, so a body can grow without moving them.
_HEAD_INDEX = 100


def build(
    name: str,
    *,
    input_shape: tuple[int, ...],
    num_classes: int,
    seed: int,
    multitask: bool = False,
) -> keras.Model:
    """Builds the architecture `name` as a functional Keras model whose weights exist.

    The outputs are logits (no softmax); train with `from_logits=True` losses. Every layer
    has a fixed name (`conv1`, `dense1`, `logits`, ...). The kernel of the layer with index
    `i` (body layers count from 1; the heads are 100 and 101) is drawn by
    `GlorotUniform(seed=seed * 1000 + i)` and every bias starts at zero, so the same seed
    gives the same initial weights bit for bit, whatever Keras's global seed state and in
    whichever thread the model is built.

    Args:
        name: A name from `catalog()`.
        input_shape: The shape of one example, `(height, width, channels)` for images.
        num_classes: Outputs of the classification head.
        seed: Seeds every initializer.
        multitask: Give the model two heads on one shared body: the outputs are then a
            dict `{"digit": logits (num_classes), "parity": logits (2)}` instead of one
            `logits` tensor.

    Raises:
        ValueError: A bad argument; the message names it (`model`, `input_shape`, ...).
    """
    registry.info(name)
    input_shape = _checked_shape(name, input_shape)
    if isinstance(num_classes, bool) or operator.index(num_classes) < 2:
        raise ValueError(f"num_classes: must be an integer of at least 2 (got {num_classes!r})")
    seed = operator.index(seed)

    import keras

    from core.models.architectures import BODIES

    def kernel_init(index: int) -> keras.initializers.Initializer:
        return keras.initializers.GlorotUniform(seed=seed * 1000 + index)

    inputs = keras.Input(shape=input_shape, name="image")
    features = inputs
    for layer in BODIES[name](input_shape, kernel_init):
        features = layer(features)

    def head(units: int, index: int, head_name: str) -> keras.KerasTensor:
        dense = keras.layers.Dense(units, kernel_initializer=kernel_init(index), name=head_name)
        return dense(features)

    if multitask:
        outputs = {
            "digit": head(num_classes, _HEAD_INDEX, "digit"),
            "parity": head(2, _HEAD_INDEX + 1, "parity"),
        }
    else:
        outputs = head(num_classes, _HEAD_INDEX, "logits")
    return keras.Model(inputs, outputs, name=f"{name}_multitask" if multitask else name)


def _checked_shape(name: str, input_shape: tuple[int, ...]) -> tuple[int, ...]:
    try:
        shape = tuple(operator.index(size) for size in input_shape)
    except TypeError:
        shape = ()
    if not shape or min(shape) < 1:
        raise ValueError(f"input_shape: must be positive integers (got {input_shape!r})")
    if registry.info(name).images and len(shape) != 3:
        raise ValueError(
            f"input_shape: {name} needs (height, width, channels) (got {input_shape!r})"
        )
    return shape
