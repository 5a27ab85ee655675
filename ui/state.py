"""The one engine of the server, and the few selections a session keeps.

The engine (and the registry of sweeps) is a `st.cache_resource`: every session and every
browser tab shares it, its run threads outlive any session, and it is never rebuilt by a
rerun. Session state holds
only selections (which runs to watch or compare, a config to clone into the form), under
the keys below.
"""

from __future__ import annotations

import os

import streamlit as st

from core.engine import Engine
from core.store import StoreError
from core.sweep import Sweep

WATCH = "watch"  # run ids on the Live page
COMPARE = "compare"  # run ids on the Compare page
PREFILL = "prefill"  # a RunConfig dict for the Train form
REFRESH_SECONDS = 1.0


def engine() -> Engine:
    """The server's engine; a store that cannot be used stops the page with the reason."""
    try:
        return shared_engine()
    except StoreError as exc:
        st.error(f"The lab's store cannot be used: {exc}", icon="🛑")
        st.stop()


@st.cache_resource(show_spinner=False)
def shared_engine() -> Engine:
    """One engine for every session: `OPTLAB_STORE` (else `runs/optlab.sqlite`), at most
    `OPTLAB_MAX_CONCURRENT` (else 2) runs training at once."""
    return Engine(
        os.environ.get("OPTLAB_STORE"),
        max_concurrent=int(os.environ.get("OPTLAB_MAX_CONCURRENT", "2")),
    )


def open_page(page: str, **selection: object) -> None:
    """Stores `selection` in session state and switches to `page` (a path under pages/)."""
    for key, value in selection.items():
        st.session_state[key] = value
    st.switch_page(page)


def refresh_interval(active: bool) -> float | None:
    """`run_every` for a fragment: tick while something trains, never otherwise."""
    return REFRESH_SECONDS if active else None


@st.cache_resource(show_spinner=False)
def sweeps() -> dict[str, Sweep]:
    """The sweeps this server drives (or has opened), by study name, for every session."""
    return {}
