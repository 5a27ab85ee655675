"""What the pages offer to keep: a run's trained model (a `.keras` download on the Live
and Compare pages), and a table as CSV."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import streamlit as st

from core.engine import RunStatus
from core.engine.api import Runs
from core.engine.checkpoints import Checkpoint, best_of
from core.export import table_csv


def csv_download(rows: Sequence[Mapping[str, object]], file_name: str, key: str) -> None:
    """A "Download as CSV" button for a table's `rows`, for every session, viewers'
    included (it writes nothing). It stands in for the table's own toolbar download,
    which is off (`client.disableDataExport`): that one wrote each cell as it is, so a
    run named `=HYPERLINK(...)` opened as a formula; `core.export.table_csv` makes every
    cell `spreadsheet_safe`."""
    st.download_button(
        "Download as CSV",
        data=lambda: table_csv(rows),  # built at the click, not at each refresh
        file_name=file_name,
        mime="text/csv",
        on_click="ignore",
        icon=":material/download:",
        type="tertiary",
        key=key,
    )


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
