"""An example model plugin: a tiny Vision Transformer (Dosovitskiy et al., 2021).

Drop a file like this one into `plugins/` (or the folder named by `OPTLAB_PLUGINS`) and the
model appears in Train, the CLI (`--model tiny_vit`) and sweeps. Its layers are named so
that the usual per-layer decay of a transformer can be tried from the form's `layer_rules`:
decay off for norms and biases (`norm|bias`: weight_decay 0) and a lower rate for the
embeddings (`embedding`: lr_scale 0.1).
"""

from typing import Any

import keras

from core.models import register_model

DIM = 32
HEADS = 2
BLOCKS = 2
PATCHES_PER_SIDE = 4


@keras.saving.register_keras_serializable(package="optlab_plugins")
class PositionEmbedding(keras.layers.Layer):
    """Adds a learned vector to each patch: where a patch is, the attention cannot see."""

    def __init__(self, seed: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seed = seed

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        self.embeddings = self.add_weight(
            shape=tuple(input_shape[1:]),
            initializer=keras.initializers.RandomNormal(stddev=0.02, seed=self.seed),
            name="embeddings",
        )

    def call(self, patches: keras.KerasTensor) -> keras.KerasTensor:
        return patches + self.embeddings

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "seed": self.seed}


@register_model(
    "tiny_vit",
    description="A tiny Vision Transformer: 4×4 patches embedded in 32 dimensions, "
    "2 transformer blocks (2 heads), mean-pooled → logits.",
    images=True,
)
def tiny_vit(
    input_shape: tuple[int, ...], num_classes: int, seed: int, blocks: int = BLOCKS
) -> keras.Model:
    """Patch embedding (a convolution with stride = kernel = the patch) → position
    embedding → `blocks` × [LayerNorm → attention → add; LayerNorm → MLP → add] →
    LayerNorm → mean over patches → Dense logits. Every initializer is seeded from `seed`.
    (The lab builds it with 2 blocks; the bench times a deeper one.)"""
    height, width, _ = input_shape
    patch = (max(1, height // PATCHES_PER_SIDE), max(1, width // PATCHES_PER_SIDE))

    def init(index: int) -> keras.initializers.Initializer:
        return keras.initializers.GlorotUniform(seed=seed * 1000 + index)

    inputs = keras.Input(shape=input_shape, name="image")
    x = keras.layers.Conv2D(
        DIM, patch, strides=patch, kernel_initializer=init(1), name="patch_embedding"
    )(inputs)
    x = keras.layers.Reshape((-1, DIM), name="patches")(x)
    x = PositionEmbedding(seed=seed * 1000 + 2, name="position_embedding")(x)
    for block in range(1, blocks + 1):
        name = f"block{block}"
        normed = keras.layers.LayerNormalization(name=f"{name}_norm1")(x)
        # Query, key and value start alike (Keras clones the one seeded initializer for
        # each); their gradients differ from the first step on.
        attended = keras.layers.MultiHeadAttention(
            HEADS, DIM // HEADS, kernel_initializer=init(10 * block), name=f"{name}_attention"
        )(normed, normed)
        x = keras.layers.Add(name=f"{name}_add1")([x, attended])
        hidden = keras.layers.LayerNormalization(name=f"{name}_norm2")(x)
        hidden = keras.layers.Dense(
            2 * DIM, "gelu", kernel_initializer=init(10 * block + 1), name=f"{name}_mlp1"
        )(hidden)
        hidden = keras.layers.Dense(
            DIM, kernel_initializer=init(10 * block + 2), name=f"{name}_mlp2"
        )(hidden)
        x = keras.layers.Add(name=f"{name}_add2")([x, hidden])
    x = keras.layers.LayerNormalization(name="final_norm")(x)
    x = keras.layers.GlobalAveragePooling1D(name="pool")(x)
    outputs = keras.layers.Dense(num_classes, kernel_initializer=init(100), name="logits")(x)
    return keras.Model(inputs, outputs, name="tiny_vit")
