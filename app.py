"""Optimizer Lab: the home page.

Thin by design: it renders what `core` offers. It imports nothing heavy, so the first page
paints before TensorFlow has loaded.
"""

import streamlit as st

from core import data, models

st.set_page_config(page_title="Optimizer Lab", page_icon="🧪", layout="wide")

st.title("🧪 Optimizer Lab")
st.markdown(
    "Build custom TensorFlow optimizers and watch them while they train: step norms, "
    "gradient norms, sparsity, loss and accuracy, live in the browser. Every optimizer is a "
    "plain Keras 3 optimizer that works in any Keras program, too."
)

left, right = st.columns(2)
with left:
    st.subheader("Datasets")
    st.dataframe(
        [
            {
                "name": d.name,
                "shape": "×".join(map(str, d.input_shape)),
                "classes": d.num_classes,
                "offline": "yes" if d.offline else "needs TFDS data",
                "about": d.description,
            }
            for d in data.catalog()
        ],
        hide_index=True,
    )
with right:
    st.subheader("Models")
    st.dataframe(
        [{"name": m.name, "about": m.description} for m in models.catalog()], hide_index=True
    )

st.page_link("pages/1_Optimizers.py", label="Browse the optimizers and their knobs", icon="📐")
