"""Follow the presenter: in a room (`optlab present`), a viewer's Live shows the runs and
the group of charts that the presenter's Live shows, until the viewer picks something
else; then it offers to follow again.

The presenter's Live publishes its view through the store at each of its chart refreshes
(`Runs.publish_view`); a viewer's reads it at each of its own (`Runs.presenter_view`), so
a change reaches the room within a refresh. Outside a room nobody follows anybody.
"""

from __future__ import annotations

import streamlit as st

from core.engine.api import Runs
from core.engine.following import PresenterView
from ui import nav, roles

PAGE = nav.LIVE.url_path  # the page a published view is of, as the store keeps it
FOLLOWING = "following:on"  # whether this viewer follows (until it picks on its own)
APPLIED = "following:applied"  # the presenter's view last shown here


def in_room() -> bool:
    """Whether the server presents to a room (started with a presenter's key)."""
    return roles.configured_key() is not None


def leads() -> bool:
    """Whether this session is the presenter of a room: its Live is published."""
    return in_room() and roles.presents()


def follows() -> bool:
    """Whether this session is a viewer that follows the presenter now."""
    return in_room() and not roles.presents() and st.session_state.get(FOLLOWING, True)


def publish(engine: Runs, runs: list[str], charts: str | None) -> None:
    """The presenter's Live as it shows now, for the room (nothing outside a room)."""
    if leads():
        engine.publish_view(PresenterView(PAGE, tuple(runs), charts))


def _moved(key: str, shown: object) -> bool:
    """Whether the viewer changed widget `key` away from what following `shown` there."""
    return st.session_state.get(key) not in (None, shown)


def follow_page(engine: Runs, selection: str, handed_over: str, charts: str) -> None:
    """Before a viewer's Live picks its runs (`views.pick_runs` under `selection`) and its
    group of charts (widget `charts`): the presenter's, while the viewer follows; a
    selection of the viewer's own ends following."""
    if not follows():
        return
    applied: PresenterView | None = st.session_state.get(APPLIED)
    if applied is not None and _moved(selection, list(applied.runs)):
        st.session_state[FOLLOWING] = False
        return
    view = engine.presenter_view()
    if view is not None and view.page == PAGE and view != applied:
        st.session_state[handed_over] = list(view.runs)
        if view.charts:
            st.session_state[charts] = view.charts
        st.session_state[APPLIED] = view


def lead_charts(engine: Runs, charts: str) -> None:
    """In a viewer's chart refresh, before the group of charts is picked (widget
    `charts`): the presenter's group while the viewer follows (and the whole page again
    when the presenter's runs changed); a group of the viewer's own ends following."""
    if not follows():
        return
    applied: PresenterView | None = st.session_state.get(APPLIED)
    if applied is not None and _moved(charts, applied.charts):
        st.session_state[FOLLOWING] = False
        st.rerun()  # the whole page, which offers to follow again
    view = engine.presenter_view()
    if view is None or view.page != PAGE or view == applied:
        return
    if applied is None or view.runs != applied.runs:
        st.rerun()  # the runs are picked by the page, outside this refresh
    if view.charts:
        st.session_state[charts] = view.charts
    st.session_state[APPLIED] = view


def offer(engine: Runs) -> None:
    """A viewer that stopped following may follow again, while a presenter's view beats."""
    if not in_room() or roles.presents() or follows() or engine.presenter_view() is None:
        return

    def again() -> None:
        st.session_state[FOLLOWING] = True
        st.session_state.pop(APPLIED, None)

    st.button("Follow the presenter", icon=":material/co_present:", on_click=again)
