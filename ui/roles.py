"""A session's role in a live demo (`optlab present`): the presenter steers, a viewer watches.

The dashboard that `optlab present` starts holds the presenter's key in its environment.
A session becomes the presenter by opening the presenter URL once (`?key=…`): it keeps the
key in its state, and the address bar drops it. Any other session is a viewer, and the
server refuses it every action, whatever it sends: `runs` hands it a read-only `Runs`
(`core.engine.read_only`), and what acts without `Runs` (a sweep's driver) is wrapped in
`presenter_only`. Pages hide the controls a viewer cannot use, with `presents`. Without a
key (`make run`) every session is the presenter.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import streamlit as st

from core import presenting
from core.engine.api import Runs
from core.engine.read_only import NotAllowed, ReadOnlyRuns
from core.escaping import escape_markdown

SHOWN = "presenter:key"  # the key this session showed, kept once the address drops it

P = ParamSpec("P")
R = TypeVar("R")


def configured_key() -> str | None:
    """The presenter's key this server was started with, or None; a key too short to
    trust stops every page, so that no session steers by default."""
    try:
        return presenting.key_from_environment()
    except ValueError as exc:
        st.error(f"The lab is misconfigured: {escape_markdown(str(exc))}", icon=":material/key:")
        st.stop()


def admit() -> None:
    """Takes a key given in the address (`?key=…`, the presenter URL): kept in the
    session when it is the presenter's, said to be wrong when not; dropped from the
    address bar either way. The frame calls it before every page."""
    given = st.query_params.get(presenting.KEY_PARAMETER)
    if given is None:
        return
    del st.query_params[presenting.KEY_PARAMETER]
    key = configured_key()
    if key is None:
        return  # no room: everyone presents already
    if presenting.role_of(given, key) is presenting.Role.PRESENTER:
        st.session_state[SHOWN] = given
    elif not presents():
        st.warning(
            "That is not the presenter's key: this session watches. Ask the presenter for "
            "the presenter URL to steer the runs.",
            icon=":material/key_off:",
        )


def role() -> presenting.Role:
    """This session's role, from the key it showed (compared in constant time)."""
    return presenting.role_of(st.session_state.get(SHOWN), configured_key())


def presents() -> bool:
    """Whether this session may act: start, steer, delete, upload, export."""
    return role() is presenting.Role.PRESENTER


def runs(client: Runs) -> Runs:
    """The `Runs` this session acts through: `client` for the presenter, and for a viewer
    a wrapper that reads through it and refuses every action."""
    return client if presents() else ReadOnlyRuns(client)


def presenter_only(action: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """An action that does not go through `Runs` (a sweep's driver): refused with
    `NotAllowed` for a viewer, before it does anything."""

    def guard(act: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(act)
        def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
            if not presents():
                raise NotAllowed(action)
            return act(*args, **kwargs)

        guarded.presenter_only = action  # type: ignore[attr-defined]  # for the tests
        return guarded

    return guard


def presenter_page(title: str) -> None:
    """Stops a page that is the presenter's alone (Train), for a viewer, saying so."""
    if not presents():
        st.info(
            f"{title} is the presenter's: this session watches the runs on Home, Live and Compare.",
            icon=":material/visibility:",
        )
        st.stop()


def share_panel() -> None:
    """The audience URL and its QR code, for the presenter to show the room; only when
    the lab presents to one (a key is configured)."""
    if configured_key() is None or not presents():
        return
    address = str(st.get_option("server.address") or "127.0.0.1")
    url = presenting.audience_url(presenting.room_host(address), int(st.get_option("server.port")))
    with st.expander("Share with the room", icon=":material/qr_code_2:", expanded=True):
        text, code = st.columns([3, 1])
        text.markdown(
            f"Anyone with this address watches the runs live, and cannot touch them:  \n"
            f"**{escape_markdown(url)}**"
        )
        text.caption("Viewers see Home, Live, Compare, the optimizers, sweeps and recipes.")
        code.image(presenting.qr_svg(url), width=180)
