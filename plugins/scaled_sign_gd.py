"""An example plugin: scaled sign descent, written once on the flat parameter vector.

Drop a file like this one into `plugins/` (or the folder named by `OPTLAB_PLUGINS`) and the
optimizer appears in the lab, with every common knob (clip_norm, radius, weight_decay, …),
next to the built-in ones. Only files in that folder are ever imported.
"""

import tensorflow as tf

from core.optimizers import GlobalVectorOptimizer, register


@register(
    "scaled_sign_gd",
    summary="Sign descent scaled by the mean gradient magnitude (Karimireddy et al., 2019).",
    update_rule="x ← x − η·(‖g‖₁ / n)·sign(g)",
)
class ScaledSignGD(GlobalVectorOptimizer):
    """Steps every coordinate by the same amount, the mean |g| over the whole vector.

    The scale needs all gradients at once, which is what a global-vector optimizer sees.
    """

    def update(self, x: tf.Tensor, g: tf.Tensor) -> tf.Tensor:
        scale = tf.reduce_mean(tf.abs(g))
        return x - tf.cast(self.learning_rate, x.dtype) * scale * tf.sign(g)
