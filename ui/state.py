"""The dashboard's one client of the engine, and the few selections a session keeps.

The dashboard never trains, nor drives a sweep: runs train, and sweeps are driven, in the
engine process (`python -m core serve`), which the client launches when none serves the
store, and which outlives a restart of Streamlit. The client (and the registry of sweeps)
is a `st.cache_resource`: every session and every browser tab shares it. Session state
holds selections (which runs to watch or compare, a config to clone into the form), each
run's colour, under the keys below, and what the Train and Sweep forms hold, which `KEPT`
keeps for the session.
"""

from __future__ import annotations

import os
from typing import Literal

import streamlit as st

from core.charts import ColourBook
from core.engine.api import Runs
from core.engine.client import EngineClient, use_engine_plugins
from core.engine.server import launch
from core.escaping import escape_markdown
from core.redaction import redacted
from core.store import Store, StoreError, default_location
from core.sweep import Sweep
from ui import roles

WATCH = "watch"  # run ids on the Live page
COMPARE = "compare"  # run ids on the Compare page
PREFILL = "prefill"  # a RunConfig dict for the Train form
COLOURS = "colours"  # a run's colour, the same on every page of the session
REFRESH_SECONDS = 1.0  # status, tables
# A watched run's status line (Live): each tick costs each open tab's browser a share of
# a core, on the cores the run trains on (what watching costs: bench figure 9).
PROGRESS_REFRESH_SECONDS = 2.0
CHART_REFRESH_SECONDS = 5.0  # charts: a redraw costs each open tab's browser far more
SIDEBAR_REFRESH_SECONDS = 5.0  # "Training now", on every page
PAGE_LOCK_SECONDS = 5.0
# The forms' widgets (`persist_state`) keep what was typed for the session: by default
# Streamlit drops a widget's value once a run does not draw it, so leaving Train or Sweep
# for another page and coming back reset the form. A form's tables keep their rows in a
# key of their own (`ui.forms.table`), which no page switch drops.
KEPT: Literal["session"] = "session"


def engine() -> Runs:
    """The server's engine client, as the `Runs` every page and `ui/` module is typed
    against (read-only for a viewer of a live demo: `ui.roles`); a store that cannot be
    used stops the page with the reason."""
    try:
        return roles.runs(shared_engine())
    except StoreError as exc:
        why = escape_markdown(redacted(str(exc)))
        st.error(f"The lab's store cannot be used: {why}", icon=":material/error:")
        st.stop()


@st.cache_resource(show_spinner=False)
def shared_engine() -> EngineClient:
    """One client for every session, on `OPTLAB_STORE` (else `runs/optlab.sqlite`). The
    engine it launches trains at most `OPTLAB_MAX_CONCURRENT` (else 3) runs at once."""
    location = default_location()
    max_concurrent = int(os.environ.get("OPTLAB_MAX_CONCURRENT", "3"))
    # A page waits a few seconds for the store's write lock, not a run's full patience.
    store = Store(location, timeout=PAGE_LOCK_SECONDS)
    client = EngineClient(store, launch=lambda: launch(location, max_concurrent=max_concurrent))
    client.register_dashboard()
    use_engine_plugins(client)  # this process never imports TensorFlow
    client.ensure_engine(wait=False)  # TensorFlow warms up there while the page paints
    return client


def colours() -> ColourBook:
    """This session's colour for each run it has drawn (see `core.charts.ColourBook`)."""
    return st.session_state.setdefault(COLOURS, ColourBook())


def open_page(page: str, **selection: object) -> None:
    """Stores `selection` in session state and switches to `page`, a page's file
    (`ui.nav.LIVE.file`)."""
    for key, value in selection.items():
        st.session_state[key] = value
    st.switch_page(page)


def refresh_interval(active: bool, seconds: float = REFRESH_SECONDS) -> float | None:
    """`run_every` for a fragment: tick every `seconds` while something trains, never
    otherwise."""
    return seconds if active else None


@st.cache_resource(show_spinner=False)
def sweeps() -> dict[str, Sweep]:
    """The sweeps this server has opened, by study name, for every session: readers of
    their studies (the engine process drives them, or `optlab sweep`)."""
    return {}
