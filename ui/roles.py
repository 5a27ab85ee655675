"""A session's role in a live demo (`optlab present`): the presenter steers, a viewer watches.

The dashboard that `optlab present` starts holds the presenter's key in its environment.
A session becomes the presenter by opening the presenter URL once (`?key=…`): it keeps the
key in its state, and the address bar drops it; its browser's cookie
(`ui.presenter_cookie`) makes a later session of that browser (a reload) the presenter
again, for as long as this process runs. Any other session is a viewer, and the
server refuses it every action, whatever it sends: `runs` hands it a read-only `Runs`
(`core.engine.read_only`), and what acts without `Runs` (a sweep's driver) is wrapped in
`presenter_only`. Pages hide the controls a viewer cannot use, with `presents`. Without a
key (`make run`) every session is the presenter.

What the server does outside a session's script asks `may_upload`: the upload route
(`ui.upload_guard`) runs on the server's event loop, where no session state is at hand,
so the sessions admitted as the presenter are also kept in `ADMITTED`, server-wide. Wrong
keys are limited per client address (`core.guesses`): 5 a minute, then a wait.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from core import presenter
from core.engine.api import Runs
from core.engine.read_only import NotAllowed, ReadOnlyRuns
from core.escaping import escape_markdown
from core.guesses import Guesses, TooManyGuesses
from ui import presenter_cookie

SHOWN = "presenter:key"  # the key this session showed, kept once the address drops it
#: What `st.context.ip_address` leaves unnamed: a browser on this machine (the loopback
#: addresses), which guesses as one address.
THIS_MACHINE = "this machine"

P = ParamSpec("P")
R = TypeVar("R")


def configured_key() -> str | None:
    """The presenter's key this server was started with, or None; a weak key
    (`presenter.checked_key`) stops every page, so that no session steers by default."""
    try:
        return presenter.key_from_environment()
    except ValueError as exc:
        st.error(f"The lab is misconfigured: {escape_markdown(str(exc))}", icon=":material/key:")
        st.stop()


class Ids:
    """A set of ids (of sessions, of browsers' cookies), safe to use from any thread."""

    def __init__(self) -> None:
        self._ids: set[str] = set()
        self._lock = threading.Lock()

    def add(self, id_: str) -> None:
        with self._lock:
            self._ids.add(id_)

    def discard(self, id_: str) -> None:
        with self._lock:
            self._ids.discard(id_)

    def __contains__(self, id_: object) -> bool:
        with self._lock:
            return id_ in self._ids


#: The sessions admitted as the presenter in this server (by the key, or their browser's
#: cookie): `admit` adds one, and the upload manager forgets it as Streamlit shuts the
#: session down (`ui.upload_guard`).
ADMITTED = Ids()
#: The browsers admitted as the presenter's in this server, by their cookie's token
#: (`ui.presenter_cookie`): in this process's memory only, so that a restart forgets them.
BROWSERS = Ids()
#: The wrong keys shown of late, by client address.
GUESSES = Guesses("presenter key")


def may_upload(session_id: str) -> bool:
    """Whether the session `session_id` may upload a file: it was admitted as the
    presenter, or the lab presents to no room. Safe on any thread, outside a script run;
    a weak key lets no one upload, as it lets no one steer."""
    try:
        key = presenter.key_from_environment()
    except ValueError:
        return False
    return key is None or session_id in ADMITTED


def admit() -> None:
    """Takes a key given in the address (`?key=…`, the presenter URL): kept in the
    session when it is the presenter's, said to be wrong when not; dropped from the
    address bar either way. An address that showed 5 wrong keys in the last minute is
    told to wait, its key not compared. Without a key in the address, a session of a
    browser admitted before (its cookie) is the presenter again. The frame calls it
    before every page."""
    given = st.query_params.get(presenter.KEY_PARAMETER)
    if given is None:
        readmit()
        return
    del st.query_params[presenter.KEY_PARAMETER]
    key = configured_key()
    if key is None:
        return  # no room: everyone presents already
    try:
        right = GUESSES.check(
            client_address(), lambda: presenter.role_of(given, key) is presenter.Role.PRESENTER
        )
    except TooManyGuesses as refused:
        if not presents():
            st.warning(
                f"Too many wrong keys from this address: try again in "
                f"{math.ceil(refused.wait)} s. This session watches meanwhile.",
                icon=":material/timer:",
            )
        return
    if right:
        st.session_state[SHOWN] = given
        ADMITTED.add(_session_id())
        if (token := presenter_cookie.token()) is not None:
            BROWSERS.add(token)
    elif not presents():
        st.warning(
            "That is not the presenter's key: this session watches. Ask the presenter for "
            "the presenter URL to steer the runs.",
            icon=":material/key_off:",
        )


def readmit() -> None:
    """Makes this session the presenter when its browser's cookie holds a token that this
    process admitted (`ui.presenter_cookie`): a reload of the presenter's page, a new
    tab of its browser. A token made up, or admitted by a process before this one,
    leaves a viewer."""
    if SHOWN in st.session_state or (token := presenter_cookie.token()) is None:
        return
    key = configured_key()
    if key is not None and token in BROWSERS:
        st.session_state[SHOWN] = key  # as the session that showed it did
        ADMITTED.add(_session_id())


def client_address() -> str:
    """The address this session's browser connects from, as the server sees it (behind a
    proxy on this machine, the address the proxy forwards); `THIS_MACHINE` for the
    loopback addresses, and where no connection is known (a script run under AppTest)."""
    address = st.context.ip_address
    return address if isinstance(address, str) else THIS_MACHINE


def _session_id() -> str:
    """This session's id, which names it in the upload route's addresses."""
    ctx = get_script_run_ctx()
    if ctx is None:
        raise RuntimeError("roles: no session: called outside a script run")
    return ctx.session_id


def role() -> presenter.Role:
    """This session's role, from the key it showed (compared in constant time)."""
    return presenter.role_of(st.session_state.get(SHOWN), configured_key())


def presents() -> bool:
    """Whether this session may act: start, steer, delete, upload, export."""
    return role() is presenter.Role.PRESENTER


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
    url = presenter.audience_url(presenter.room_host(address), int(st.get_option("server.port")))
    with st.expander("Share with the room", icon=":material/qr_code_2:", expanded=True):
        text, code = st.columns([3, 1])
        text.markdown(
            f"Anyone with this address watches the runs live, and cannot touch them:  \n"
            f"**{escape_markdown(url)}**"
        )
        text.caption("Viewers see Home, Live, Compare, the optimizers, sweeps and recipes.")
        code.image(presenter.qr_svg(url), width=180)
