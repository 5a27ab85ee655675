"""`build`: a seeded, built Keras model from a catalog name."""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING

from core.models import model_catalog

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
        num_classes: Outputs of the classification head; 1 for a regression, whose one
            output, the prediction, comes from a head called `prediction`.
        seed: Seeds every initializer.
        multitask: Give the model two heads on one shared body: the outputs are then a
            dict `{"digit": logits (num_classes), "parity": logits (2)}` instead of one
            `logits` tensor.

    Raises:
        ValueError: A bad argument; the message names it (`model`, `input_shape`, ...).
    """
    info = model_catalog.info(name)
    input_shape = _checked_shape(name, input_shape)
    if isinstance(num_classes, bool) or operator.index(num_classes) < 1:
        raise ValueError(f"num_classes: must be an integer of at least 1 (got {num_classes!r})")
    if multitask and num_classes < 2:
        raise ValueError("multitask: needs a classification (the class and its parity)")
    seed = operator.index(seed)
    if info.source != "core":
        if multitask:
            raise ValueError(f"multitask: {name} is a plugin's model, with one head")
        return _plugin_model(name, input_shape, num_classes, seed)

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
        outputs = head(num_classes, _HEAD_INDEX, "logits" if num_classes > 1 else "prediction")
    return keras.Model(inputs, outputs, name=f"{name}_multitask" if multitask else name)


def _plugin_model(
    name: str, input_shape: tuple[int, ...], num_classes: int, seed: int
) -> keras.Model:
    """The plugin model `name`, checked: a `keras.Model` of `num_classes` logits."""
    import keras

    plugin = model_catalog.PLUGINS.entry(name)
    if plugin is None:
        raise ValueError(f"model: {name}'s plugin is not loaded in this process")
    model = plugin.build(input_shape=input_shape, num_classes=num_classes, seed=seed)
    if not isinstance(model, keras.Model):
        raise ValueError(
            f"model: {name}'s plugin returned {type(model).__name__}, not a keras.Model"
        )
    try:
        shape = tuple(model.compute_output_shape((None, *input_shape)))
    except Exception:  # several outputs, or a model that cannot say
        shape = None
    if shape is None or shape[1:] != (num_classes,):
        raise ValueError(
            f"model: {name}'s plugin model outputs {shape}; it must output "
            f"(batch, {num_classes}): a logit per class, or a regression's one prediction"
        )
    return model


def _checked_shape(name: str, input_shape: tuple[int, ...]) -> tuple[int, ...]:
    try:
        shape = tuple(operator.index(size) for size in input_shape)
    except TypeError:
        shape = ()
    if not shape or min(shape) < 1:
        raise ValueError(f"input_shape: must be positive integers (got {input_shape!r})")
    if model_catalog.info(name).images and len(shape) != 3:
        raise ValueError(
            f"input_shape: {name} needs (height, width, channels) (got {input_shape!r})"
        )
    return shape
