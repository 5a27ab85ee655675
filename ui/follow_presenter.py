"""Follow the presenter: in a room (`optlab present`), a viewer goes where the presenter
goes, page to page, and shows what the presenter's page shows (Live: its runs and group
of charts; Recipes: the recipe whose charts it shows; a page that publishes its own state,
the Playground: its widgets as the presenter's), until the viewer picks something else or
opens another page itself; then it offers to follow again.

The presenter publishes its view through the store (`Runs.publish_view`): the frame at
each run of a page, Live at each of its chart refreshes, and a tick in the sidebar of
every page between them (`keep_up`), so that the view beats while the presenter reads. A
viewer reads it at each of its own ticks, so a change reaches the room within a refresh.
Outside a room nobody follows anybody.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import streamlit as st

from core.engine.api import Runs
from core.engine.following import PresenterView
from ui import nav, roles, state

PAGE = nav.LIVE.url_path  # the page a published view is of, as the store keeps it
FOLLOWING = "following:on"  # whether this viewer follows (until it picks on its own)
APPLIED = "following:applied"  # the presenter's view last shown here
HERE = "following:here"  # the page this session shows (its address), as the frame ran it
LED = "following:led"  # the presenter's page this viewer was led to last
PUBLISHED = "following:published"  # the presenter's view, as published last
STATE = "following:state"  # the presenter's page state last applied here (JSON text)


def in_room() -> bool:
    """Whether the server presents to a room (started with a presenter's key)."""
    return roles.configured_key() is not None


def leads() -> bool:
    """Whether this session is the presenter of a room: its Live is published."""
    return in_room() and roles.presents()


def follows() -> bool:
    """Whether this session is a viewer that follows the presenter now."""
    return in_room() and not roles.presents() and st.session_state.get(FOLLOWING, True)


def publish(
    engine: Runs,
    runs: list[str],
    charts: str | None = None,
    page: nav.Page = nav.LIVE,
    state: Mapping[str, Any] | None = None,
) -> None:
    """The presenter's `page` as it shows now (its runs, Live's group of charts, the
    page's own `state`: session-state keys and their JSON-able values, which a following
    viewer's `follow_state` sets), for the room (nothing outside a room)."""
    if leads():
        text = None if state is None else json.dumps(state, sort_keys=True)
        _publish(engine, PresenterView(page.url_path, tuple(runs), charts, text))


def _publish(engine: Runs, view: PresenterView) -> None:
    st.session_state[PUBLISHED] = view
    engine.publish_view(view)


def lead_or_follow(engine: Runs, page: nav.Page) -> None:
    """Before a page runs, in a room: the presenter publishes the page (with what it
    showed there last, until the page publishes more), and a following viewer is led
    to the presenter's page (`st.switch_page`)."""
    st.session_state[HERE] = page.url_path
    if leads():
        last: PresenterView | None = st.session_state.get(PUBLISHED)
        if last is None or last.page != page.url_path:
            last = PresenterView(page.url_path)
        _publish(engine, last)
    else:
        _follow_onto(engine)


def _follow_onto(engine: Runs) -> None:
    """A following viewer goes to the presenter's page; one that opened another page
    itself since it was led stops following. A page that is the presenter's alone
    (Train) leads nowhere: the viewer stays where it is."""
    if not follows() or (view := engine.presenter_view()) is None:
        return
    target = nav.at(view.page)
    if target is None or target.presenters_only:
        return
    here, led = st.session_state.get(HERE), st.session_state.get(LED)
    if led is not None and here != led and view.page == led:
        st.session_state[FOLLOWING] = False  # it went elsewhere itself
        return
    st.session_state[LED] = view.page
    if here != view.page:
        st.switch_page(target.file)


def keep_up(engine: Runs) -> None:
    """In a room, on every page: the offer to follow again, above the page (`offer`);
    and, in the sidebar, a tick every few seconds, at which the presenter's view beats
    (published again) and a following viewer goes where the presenter went."""
    if not in_room():
        return
    offer(engine)

    @st.fragment(run_every=state.SIDEBAR_REFRESH_SECONDS)
    def tick() -> None:
        if leads():
            if (view := st.session_state.get(PUBLISHED)) is not None:
                engine.publish_view(view)
        else:
            _follow_onto(engine)

    with st.sidebar:
        tick()


def follow_state(engine: Runs, page: nav.Page) -> None:
    """Before `page` draws its widgets, for a viewer that follows: the session-state keys
    the presenter published with `page` (`publish(state=...)`) set to the presenter's
    values; a value the viewer changed since it was set ends following."""
    if not follows():
        return
    applied: str | None = st.session_state.get(STATE)
    if applied is not None and any(_moved(k, v) for k, v in json.loads(applied).items()):
        st.session_state[FOLLOWING] = False
        return
    view = engine.presenter_view()
    drawn = view.state if view is not None and view.page == page.url_path else None
    if drawn is not None and drawn != applied:
        for key, value in json.loads(drawn).items():
            st.session_state[key] = value
        st.session_state[STATE] = drawn
    _keep_following(engine, page, drawn)


def _keep_following(engine: Runs, page: nav.Page, drawn: str | None) -> None:
    """Every few seconds, while this viewer follows: the page again when the presenter's
    state on `page` is no longer `drawn`, the one this run applied."""

    @st.fragment(run_every=state.SIDEBAR_REFRESH_SECONDS)
    def watch() -> None:
        view = engine.presenter_view() if follows() else None
        if view is not None and view.page == page.url_path and view.state not in (None, drawn):
            st.rerun()

    watch()


def led_runs(engine: Runs, page: nav.Page) -> tuple[str, ...] | None:
    """The runs the presenter shows on `page` (Recipes: those of the recipe whose charts
    it shows), while this viewer follows it there; None otherwise."""
    if not follows() or (view := engine.presenter_view()) is None:
        return None
    return view.runs if view.page == page.url_path and view.runs else None


def unfollow() -> None:
    """This viewer picked something of its own: it stops following (`offer` offers to
    follow again)."""
    st.session_state[FOLLOWING] = False


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
        if view.runs:  # none while the frame publishes the page, before Live publishes more
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
        st.session_state.pop(STATE, None)
        st.session_state.pop(LED, None)  # led afresh, wherever it is

    st.button("Follow the presenter", icon=":material/co_present:", on_click=again)
