"""What the Sweep page does to a sweep: hand it to the engine (start, resume), stop it.
None drives anything here: each writes a command to the sweep's study, which the engine
process (or the `optlab sweep` driving it) carries out (see `core.sweep.control`). A
viewer of a live demo is refused before the study is touched (`Runs.steer_sweeps`, and
`presenter_only`)."""

from __future__ import annotations

import streamlit as st

from core.engine.api import Runs
from core.escaping import escape_markdown
from core.knobs import InvalidInput
from core.redaction import redacted
from core.store import StoreError
from core.sweep import Sweep
from ui import roles, state


def hand_over(sweep: Sweep) -> None:
    """Hands `sweep` to the engine process (`Sweep.submit`), launching one if none
    serves the store (it may have been stopped since the page opened): a sweep waits in
    its study only until an engine takes it up."""
    sweep.submit()
    state.shared_engine().ensure_engine(wait=False)


@roles.presenter_only("resume a sweep")
def resume(engine: Runs, name: str) -> None:
    """Hands the study to the engine process again, which drives it from where it
    stopped."""
    try:
        sweep = Sweep.load(engine, name)
        hand_over(sweep)
    except (InvalidInput, StoreError) as exc:
        st.toast(f"Not resumed: {escape_markdown(redacted(str(exc)))}", icon=":material/warning:")
    else:
        state.sweeps()[name] = sweep


@roles.presenter_only("stop a sweep")
def stop(sweep: Sweep) -> None:
    """Asks whoever drives the sweep to stop it, and the runs of its trials."""
    try:
        sweep.stop()
    except StoreError as exc:
        st.toast(f"Not stopped: {escape_markdown(redacted(str(exc)))}", icon=":material/warning:")
