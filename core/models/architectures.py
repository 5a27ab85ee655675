"""The layer stacks of each architecture, up to (not including) the output heads.

Every layer has a fixed, readable name (`conv1`, `pool1`, `dense1`, ...) because
per-layer telemetry and per-layer optimizer rules address layers by name. Every kernel
initializer is handed in by the caller, seeded from the run seed and the layer's index,
so that a seed always gives the same initial weights.

This module imports Keras at import time; `core.models.build` imports it lazily.
"""

from __future__ import annotations

from collections.abc import Callable

import keras

KernelInit = Callable[[int], keras.initializers.Initializer]
"""Returns the kernel initializer of the layer with the given index."""

Body = Callable[[tuple[int, ...], KernelInit], list[keras.layers.Layer]]


def linear(input_shape: tuple[int, ...], kernel_init: KernelInit) -> list[keras.layers.Layer]:
    """Flatten, and nothing else: the output head is the whole model, so the logits (or a
    regression's prediction) are affine in the input and the weights, x·W + b."""
    del input_shape, kernel_init  # Any shape flattens; no layer here has a kernel.
    return [keras.layers.Flatten(name="flatten")]


def mlp(input_shape: tuple[int, ...], kernel_init: KernelInit) -> list[keras.layers.Layer]:
    """Flatten → Dense 128 relu → Dense 64 relu."""
    del input_shape  # Any shape flattens.
    return [
        keras.layers.Flatten(name="flatten"),
        keras.layers.Dense(128, "relu", kernel_initializer=kernel_init(1), name="dense1"),
        keras.layers.Dense(64, "relu", kernel_initializer=kernel_init(2), name="dense2"),
    ]


def lenet(input_shape: tuple[int, ...], kernel_init: KernelInit) -> list[keras.layers.Layer]:
    """LeNet-5 (LeCun et al., 1998) with ReLU and max pooling, for any image size.

    Conv 6@5×5 relu → MaxPool 2 → Conv 16@5×5 relu → MaxPool 2 → Flatten → Dense 120 relu →
    Dense 84 relu. Padding, adapted as most MNIST ports do: `conv1` pads (`"same"`) in
    place of the article's 32×32 padded digits, so 28×28 inputs reach `conv2` at 14×14 and
    flatten to the article's 16×5×5 = 400 features. `conv2` keeps the article's `"valid"`
    padding whenever its 5×5 kernel fits and pads otherwise (8×8 digits reach it at 4×4),
    and the pools pad odd sizes, so no feature map shrinks to nothing.
    """
    height, width = input_shape[0], input_shape[1]
    conv2_fits = min(-(-height // 2), -(-width // 2)) >= 5  # The map after pool1, rounded up.
    return [
        keras.layers.Conv2D(
            6, 5, padding="same", activation="relu", kernel_initializer=kernel_init(1), name="conv1"
        ),
        keras.layers.MaxPooling2D(2, padding="same", name="pool1"),
        keras.layers.Conv2D(
            16,
            5,
            padding="valid" if conv2_fits else "same",
            activation="relu",
            kernel_initializer=kernel_init(2),
            name="conv2",
        ),
        keras.layers.MaxPooling2D(2, padding="same", name="pool2"),
        keras.layers.Flatten(name="flatten"),
        keras.layers.Dense(120, "relu", kernel_initializer=kernel_init(3), name="dense1"),
        keras.layers.Dense(84, "relu", kernel_initializer=kernel_init(4), name="dense2"),
    ]


def cnn(input_shape: tuple[int, ...], kernel_init: KernelInit) -> list[keras.layers.Layer]:
    """Conv 32@3×3 relu → MaxPool 2 → Conv 64@3×3 relu → MaxPool 2 → Flatten → Dense 128 relu.

    Convolutions and pools pad (`"same"`), so 8×8 inputs work too.
    """
    del input_shape  # Padding makes every size work.
    return [
        keras.layers.Conv2D(
            32,
            3,
            padding="same",
            activation="relu",
            kernel_initializer=kernel_init(1),
            name="conv1",
        ),
        keras.layers.MaxPooling2D(2, padding="same", name="pool1"),
        keras.layers.Conv2D(
            64,
            3,
            padding="same",
            activation="relu",
            kernel_initializer=kernel_init(2),
            name="conv2",
        ),
        keras.layers.MaxPooling2D(2, padding="same", name="pool2"),
        keras.layers.Flatten(name="flatten"),
        keras.layers.Dense(128, "relu", kernel_initializer=kernel_init(3), name="dense1"),
    ]


BODIES: dict[str, Body] = {"linear": linear, "mlp": mlp, "lenet": lenet, "cnn": cnn}
