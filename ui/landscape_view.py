"""A run's loss landscape on Live: pick a checkpoint, have the engine compute the
landscape around it (in its process, with its progress shown here), and draw it."""

from __future__ import annotations

import streamlit as st

from core.charts import landscape_figures
from core.engine.api import Runs
from core.engine.landscape import GRID, POINTS, batch_step
from core.escaping import escape_markdown
from core.knobs import InvalidInput
from ui import roles, texts, views

ASKED = "landscape_asked"  # (run id, step) → the id of the command that asked for it


def panel(engine: Runs, run_id: str, steps: list[int]) -> None:
    """The landscape of one of the checkpoints `steps` of run `run_id`."""
    step = st.selectbox(
        "checkpoint",
        steps[::-1],
        key=f"landscape:step:{run_id}",
        format_func=lambda s: f"step {s:,}",
        help="The landscape is taken on the batch the run trained on right after it: its "
        "centre is the loss the run logged at the next step. At the run's last checkpoint, "
        "which no step follows, on the batch of its own step.",
    )
    landscape = engine.landscape(run_id, step)
    if landscape is not None:
        batch = batch_step(step, engine.status(run_id).total_steps)
        on = "its own batch (the run's last)" if batch == step else f"the batch of step {batch:,}"
        st.caption(
            f"Loss at step {step:,} on {on}: {texts.number(landscape.centre)}. Directions "
            f"filter-normalized (Li et al., 2018): {POINTS} points a slice, a "
            f"{GRID}×{GRID} grid."
        )
        # One a row: beside the slices, at 1024 px, the contour's plot was 65 px wide,
        # its colour bar and axis titles taking the rest of half a page.
        views.show_in_columns(landscape_figures(landscape), per_row=1)
        return
    asked = st.session_state.setdefault(ASKED, {}).get((run_id, step))
    if asked is None:
        if not roles.presents():
            st.caption("Not computed for this checkpoint yet.")
        elif st.button(
            "Compute the landscape", key=f"landscape:ask:{run_id}", icon=":material/landscape:"
        ):
            try:
                command = engine.ask_landscape(run_id, step)
            except InvalidInput as exc:
                st.toast(f"Not computed: {escape_markdown(str(exc))}", icon=":material/warning:")
                return
            st.session_state[ASKED][(run_id, step)] = command.id
            st.rerun()
        return
    st.fragment(waiting, run_every=1.0)(engine, run_id, step, asked)


def waiting(engine: Runs, run_id: str, step: int, command_id: int) -> None:
    """The landscape's progress; the whole page again once it is there."""
    command = engine.get_command(command_id)
    if command is not None and command.error:
        st.error(f"Not computed: {escape_markdown(command.error)}", icon=":material/error:")
        return
    if engine.landscape(run_id, step) is not None:
        st.rerun()
    done = engine.landscape_progress(run_id, step) or 0.0
    st.progress(done, text=f"Computing the landscape around step {step:,} …")
