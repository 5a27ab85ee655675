"""`GhostClipping`: DP-SGD's clipped sum Σ_i ḡ_i from one backward pass to the layers'
outputs, without any example's gradient (ghost clipping, Li et al. 2022, with the
book-keeping of Bu et al. 2023), for a model whose every trainable variable is the kernel
or bias of a `Dense` or `Conv2D` layer.

Such a layer computes z = a·W + b at each of T positions t (T = 1 for a `Dense` on a
vector; a `Conv2D`'s output pixels, with a_t the patch under its kernel, flattened), so
example i's gradients are

    ∇_W ℓ_i = A_iᵀ G_i        ∇_b ℓ_i = Σ_t G_i,t

with A_i (T×d) its inputs and G_i = ∂ℓ_i/∂z_i (T×p), which one backward pass of Σ_i ℓ_i
gives for every example at once (an example's loss depends on its own inputs alone). Then

    ‖∇_W ℓ_i‖² = ⟨A_i A_iᵀ, G_i G_iᵀ⟩     (T² (d + p) multiplications: the "ghost" norm)
               = ‖A_iᵀ G_i‖²              (T·d·p: the gradient made, when that is fewer)

and with s_i = min(1, C/‖g_i‖₂), ‖g_i‖₂ over every variable, the clipped sum is

    Σ_i s_i ∇_W ℓ_i = Σ_i A_iᵀ (s_i G_i)    Σ_i s_i ∇_b ℓ_i = Σ_{i,t} s_i G_i,t

one product each, from what the pass already holds: no second backward pass, and nothing
of size examples × parameters (`core.training.private_gradients`' Jacobian, the way for
every other model).

G is ∂ℓ/∂(the layer's output) through its activation: relu's and the identity's from the
output alone; any other's by computing z again from a and differentiating the activation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import keras
import tensorflow as tf

from core.training.losses import SingleTask

#: A floor under a gradient's norm, against 0/0 for an example with no gradient.
TINY = 1e-12


@dataclass(frozen=True)
class _Linear:
    """A `Dense` or `Conv2D` layer, called once in the model, and its variables."""

    layer: keras.layers.Layer
    kernel: tf.Variable
    bias: tf.Variable | None

    def pre_activation(self, a: tf.Tensor) -> tf.Tensor:
        """z, from the layer's input `a`, as its `call` computes it."""
        layer = self.layer
        if isinstance(layer, keras.layers.Conv2D):
            z = layer.convolution_op(a, self.kernel)
        else:
            z = keras.ops.matmul(a, self.kernel)
        return z if self.bias is None else z + self.bias

    def output_gradient(self, a: tf.Tensor, out: tf.Tensor, d_out: tf.Tensor) -> tf.Tensor:
        """G = ∂ℓ/∂z from ∂ℓ/∂(activation(z)) = `d_out`."""
        activation = self.layer.activation
        if activation in (None, keras.activations.linear):
            return d_out
        if activation is keras.activations.relu:
            return tf.where(out > 0, d_out, tf.zeros_like(d_out))
        z = self.pre_activation(a)
        with tf.GradientTape() as tape:
            tape.watch(z)
            recomputed = activation(z)
        return tape.gradient(recomputed, z, output_gradients=d_out)

    def positions(self, a: tf.Tensor, g: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """A (examples × T × d) and G (examples × T × p), in float32."""
        layer = self.layer
        a = tf.cast(a, tf.float32)
        if isinstance(layer, keras.layers.Conv2D):
            # Each patch, flattened as the kernel is ((row, column, channel)), by a
            # convolution with the identity: 8× faster than `tf.image.extract_patches`
            # on LeNet's first layer, and its strides, padding and dilation are the layer's.
            rows, cols = layer.kernel_size
            size = rows * cols * a.shape[-1]
            identity = tf.reshape(tf.eye(size), [rows, cols, a.shape[-1], size])
            a = tf.nn.conv2d(
                a,
                identity,
                strides=layer.strides,
                padding=layer.padding.upper(),
                dilations=layer.dilation_rate,
            )
        spatial = a.shape[1:-1]
        positions = -1 if None in spatial else math.prod(spatial)  # static where it can be
        shape = [tf.shape(g)[0], positions]
        return (
            tf.reshape(a, [*shape, a.shape[-1]]),
            tf.cast(tf.reshape(g, [*shape, g.shape[-1]]), tf.float32),
        )


def squared_norms(a: tf.Tensor, g: tf.Tensor, bias: bool) -> tf.Tensor:
    """Each example's ‖∇_W ℓ_i‖² (+ ‖∇_b ℓ_i‖² with `bias`), from A and G, by the cheaper
    of the ghost norm and the gradient made."""
    positions, d, p = a.shape[1], a.shape[2], g.shape[2]
    if positions == 1:  # ‖a_i g_iᵀ‖ = ‖a_i‖ ‖g_i‖
        kernel = tf.reduce_sum(tf.square(a), axis=[1, 2]) * tf.reduce_sum(tf.square(g), axis=[1, 2])
    elif positions is not None and positions * positions * (d + p) < positions * d * p:
        ghost = tf.einsum("btd,bsd->bts", a, a) * tf.einsum("btp,bsp->bts", g, g)
        kernel = tf.reduce_sum(ghost, axis=[1, 2])
    else:
        kernel = tf.reduce_sum(tf.square(tf.einsum("btd,btp->bdp", a, g)), axis=[1, 2])
    if not bias:
        return kernel
    return kernel + tf.reduce_sum(tf.square(tf.reduce_sum(g, axis=1)), axis=1)


class GhostClipping:
    """The clipped sum of each example's gradient, for the models `covers` accepts."""

    def __init__(self, model: keras.Model, task: SingleTask) -> None:
        linear = _linear_layers(model)
        if linear is None:
            raise ValueError(f"model: {model.name} has variables ghost clipping cannot see")
        self.linear = linear
        self.task = task
        self.variables = model.trainable_variables
        # The model again, returning each layer's input and output beside its outputs.
        try:
            outputs = model.output  # a functional model's, as built: a tensor or a dict
        except AttributeError:  # a Sequential's, never called on a tensor itself
            (outputs,) = model.outputs
        self._probe = keras.Model(
            model.inputs,
            [outputs, [(layer.layer.input, layer.layer.output) for layer in linear]],
        )

    @staticmethod
    def covers(model: keras.Model) -> bool:
        """Whether every trainable variable of `model` is the kernel or bias of a plain
        `Dense` or `Conv2D` (channels last, one group) that the model calls once."""
        return _linear_layers(model) is not None

    def __call__(
        self, x: tf.Tensor, y: object, clip: float
    ) -> tuple[list[tf.Tensor], object, dict[str, tf.Tensor]]:
        """Σ_i ḡ_i for each of the model's trainable variables, the outputs, and the
        per-example losses by task."""
        with tf.GradientTape() as tape:
            outputs, ends = self._probe(x, training=True)
            losses = self.task.losses(outputs, y)
            total = tf.reduce_sum(self.task.total(losses))
        d_outs = tape.gradient(
            total, [out for _, out in ends], unconnected_gradients=tf.UnconnectedGradients.ZERO
        )
        pieces = [
            layer.positions(a, layer.output_gradient(a, out, d_out))
            for layer, (a, out), d_out in zip(self.linear, ends, d_outs, strict=True)
        ]
        norms = tf.sqrt(
            tf.add_n(
                [
                    squared_norms(a, g, layer.bias is not None)
                    for layer, (a, g) in zip(self.linear, pieces, strict=True)
                ]
            )
        )
        scale = tf.minimum(1.0, clip / tf.maximum(norms, TINY))
        summed: dict[int, tf.Tensor] = {}
        for layer, (a, g) in zip(self.linear, pieces, strict=True):
            scaled = g * scale[:, None, None]
            kernel = tf.matmul(
                tf.reshape(a, [-1, a.shape[2]]),
                tf.reshape(scaled, [-1, g.shape[2]]),
                transpose_a=True,
            )
            summed[id(layer.kernel)] = tf.reshape(kernel, layer.kernel.shape)
            if layer.bias is not None:
                summed[id(layer.bias)] = tf.reduce_sum(scaled, axis=[0, 1])
        return [summed[id(v)] for v in self.variables], outputs, losses


def _linear_layers(model: keras.Model) -> list[_Linear] | None:
    """The model's `Dense` and `Conv2D` layers, if their kernels and biases are every
    trainable variable it has and each is called once; else None."""
    if not getattr(model, "inputs", None) or not getattr(model, "outputs", None):
        return None  # a subclassed model: no graph to read the layers' inputs from
    found: list[_Linear] = []
    for layer in model.layers:
        if not layer.trainable_weights:
            continue
        linear = _linear(layer)  # None for a model within: its layers' inputs are its own
        if linear is None:
            return None
        found.append(linear)
    seen = {id(v) for linear in found for v in (linear.kernel, linear.bias) if v is not None}
    if seen != {id(v) for v in model.trainable_variables}:
        return None
    return found


def _linear(layer: keras.layers.Layer) -> _Linear | None:
    """`layer` as a `_Linear`, or None if it is not a plain one."""
    if type(layer) not in (keras.layers.Dense, keras.layers.Conv2D):
        return None
    if getattr(layer, "lora_enabled", False) or getattr(layer, "quantization_mode", None):
        return None
    if isinstance(layer, keras.layers.Conv2D) and (
        layer.groups != 1 or layer.data_format != "channels_last"
    ):
        return None
    if len(layer._inbound_nodes) != 1:  # called twice: its input is not one tensor
        return None
    kernel, bias = layer.kernel, layer.bias
    wanted = {id(kernel)} | ({id(bias)} if bias is not None else set())
    if {id(v) for v in layer.trainable_weights} != wanted:
        return None
    return _Linear(layer, kernel, bias)
