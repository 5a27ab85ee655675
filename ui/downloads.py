"""A run's trained model to keep: a `.keras` download on the Live and Compare pages."""

from __future__ import annotations

import streamlit as st

from core.engine import RunStatus
from core.engine.api import Runs
from core.engine.checkpoints import Checkpoint, best_of


def checkpoint_choices(saved: list[Checkpoint]) -> dict[str, Checkpoint]:
    """The checkpoints worth offering, by label: the last, and the best validated one
    when it is another."""
    last = saved[-1]
    choices = {f"last · step {last.step:,}": last}
    best = best_of(saved)
    if best is not None and best.step != last.step:
        label = f"best validated · step {best.step:,} · val acc {best.val_accuracy:.3f}"
        choices[label] = best
    return choices


def model_download(engine: Runs, run: RunStatus, saved: list[Checkpoint]) -> None:
    """Picks a checkpoint of `run` (`saved`, not empty) and downloads its model. The
    engine process writes the file at the first click (this one never imports
    TensorFlow); later clicks send the same file."""
    choices = checkpoint_choices(saved)
    label = st.radio("checkpoint", list(choices), key=f"model:checkpoint:{run.id}")
    step = choices[label].step
    st.download_button(
        "Download .keras",
        # Called at the click, in its own thread: a page refresh never waits for it.
        data=lambda: engine.model_file(run.id, str(step)).read_bytes(),
        file_name=f"{run.id}-step-{step}.keras",
        mime="application/octet-stream",
        on_click="ignore",
        icon=":material/download:",
        key=f"model:download:{run.id}",
        width="stretch",
    )
    st.caption(
        "The model with its optimizer (slots, step count, live knob values) inside: "
        "`core.optimizers.load_model(path)` loads it, to predict or to train on with `fit`."
    )
