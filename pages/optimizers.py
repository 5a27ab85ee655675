"""Optimizers: every optimizer's update rule, its knobs, and how to use it in plain Keras."""

import streamlit as st

from core import optimizers
from core.escaping import escape_markdown
from core.optimizers import stages

st.title(":material/function: Optimizers")
st.markdown(
    "Each optimizer is an algorithm plus the common knobs, which act in this order: "
    f"{stages.order_line()}. A knob left empty is not traced at all; a live knob can "
    "change while a run trains."
)
with st.expander("The update rule, step by step"):
    st.code(stages.order_text(), language=None)

USAGE = """\
import keras
from core import optimizers
from core.optimizers import stages

optimizer = optimizers.build({args})
loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
model.compile(optimizer=optimizer, loss=loss)
model.fit(x, y, epochs=5)
"""

for spec in optimizers.specs():
    described = spec.describe()
    # A plugin's name and summary come from the engine's row in the store: text, not Markdown.
    label = f"**{escape_markdown(spec.name)}**: {escape_markdown(spec.summary)}"
    with st.expander(label, expanded=spec.name == "projected_gd"):
        st.code(spec.update_rule, language=None)
        st.dataframe(
            [
                {
                    "knob": k["name"],
                    "default": "off" if k["default"] is None else str(k["default"]),
                    "range": k["range"],
                    "live": "yes" if k["live"] else "",
                    "required": "yes" if k["required"] else "",
                    "what it does": k["help"],
                }
                for k in described["knobs"]
            ],
            hide_index=True,
            width="stretch",
        )
        st.code(USAGE.format(args=f'"{spec.name}", learning_rate=1e-3'), language="python")
        if spec.source != "core":
            st.caption(f"Plugin: {escape_markdown(spec.source)}")

for path, error in optimizers.plugin_errors().items():
    st.error(
        f"Plugin {escape_markdown(path)} did not load: {escape_markdown(error)}",
        icon=":material/error:",
    )

st.subheader("Low precision and ε")
st.markdown(
    "A run's `precision` field trains in 16 bits: `mixed_bfloat16`, or `mixed_float16` "
    "with Keras's `LossScaleOptimizer` around the optimizer (the loss scaled by a power "
    "of two, overflowing steps skipped). Either way Keras keeps the weights and the "
    "optimizer's moments in float32. ε keeps Adam's step m / (√v + ε) from dividing by "
    "zero where the second moment v is about 0; putting it inside the square root, "
    "√(v + ε), is often argued for in float16, where a tiny v underflows to 0. That "
    "reason does not arise here, and measured, ε inside √(v + ε) moves Adam's loss curve "
    "as much in float16 as in float32 (LeNet on digits, 5 epochs: the curves part by at "
    "most 0.54 and 0.53; `python -m bench.epsilon_precision`)."
)

st.subheader("Add your own")
st.markdown(
    f"Put a `.py` file in `{optimizers.plugins_folder()}` (or the folder named by "
    "`OPTLAB_PLUGINS`). Write the algorithm once on the flattened parameter vector; every "
    "knob above applies to it, and it works under `model.fit` and `MirroredStrategy`."
)
st.code(
    """import tensorflow as tf
from core.optimizers import GlobalVectorOptimizer, register


@register("scaled_sign_gd", summary="Sign descent scaled by mean |g|.",
          update_rule="x ← x − η·(‖g‖₁ / n)·sign(g)")
class ScaledSignGD(GlobalVectorOptimizer):
    def update(self, x, g):
        return x - self.learning_rate * tf.reduce_mean(tf.abs(g)) * tf.sign(g)
""",
    language="python",
)
