"""What the Sweep page does to a sweep that exists: resume it, stop it. Neither goes
through `Runs` (a sweep's driver thread does), so each is `presenter_only`: a viewer of a
live demo is refused before the study is touched."""

from __future__ import annotations

import streamlit as st

from core.engine.api import Runs
from core.escaping import escape_markdown
from core.knobs import InvalidInput
from core.redaction import redacted
from core.store import StoreError
from core.sweep import Sweep
from ui import roles, state


@roles.presenter_only("resume a sweep")
def resume(engine: Runs, name: str) -> None:
    """Drives the study again: a stopped `Sweep` cannot start twice, so a fresh one."""
    try:
        sweep = Sweep.load(engine, name)
        sweep.start()
    except (InvalidInput, StoreError) as exc:
        st.toast(f"Not resumed: {escape_markdown(redacted(str(exc)))}", icon=":material/warning:")
    else:
        state.sweeps()[name] = sweep


@roles.presenter_only("stop a sweep")
def stop(sweep: Sweep) -> None:
    """Stops the sweep's driver, and the runs of its trials."""
    sweep.stop()
