"""The presenter's cookie: a presenter who reloads the page stays the presenter, with the
key in no address.

The response to the presenter URL (a page asked for with `?key=…`) sets a cookie holding
a new random token: HttpOnly, so no script of the page reads it, and SameSite=Strict, so
no other site's page sends it. The server sets it before the key is checked, whatever the
key; the session that shows the right key then admits its browser's token
(`ui.roles.admit`), in this process's memory alone. A later session of that browser (a
reload, another tab) shows the token and steers; a token that this process did not admit
(made up, another browser's, or one from a `present` process that has stopped since)
admits nobody. Nothing is written anywhere: a restart forgets every token.

`install` adds the cookie to the server that Streamlit's CLI starts next (`ui.serve`).
"""

from __future__ import annotations

import functools
import secrets
import urllib.parse
from collections.abc import Callable
from typing import Any

import streamlit as st
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from streamlit import config
from streamlit.web.server.starlette import starlette_app

from core import presenter

#: The cookie's name, before the server's port: a browser sends a host's cookies to all its
#: ports, and two rooms served from one machine keep a cookie each.
PREFIX = "optlab_presenter_"


def name() -> str:
    """The cookie's name on this server."""
    return f"{PREFIX}{config.get_option('server.port')}"


def token() -> str | None:
    """The token this session's browser sent (in the request that opened the session's
    connection), None without one."""
    return st.context.cookies.get(name())


def _set_cookie() -> str:
    """A `Set-Cookie` value with a new token, for every page of the server, until the
    browser closes."""
    path = "/" + str(config.get_option("server.baseUrlPath") or "").strip("/")
    return f"{name()}={secrets.token_urlsafe(32)}; Path={path}; HttpOnly; SameSite=Strict"


def _asks_key(scope: Scope) -> bool:
    """Whether `scope` is a page asked for with a key (the presenter URL), on a server
    that presents to a room with a key strong enough to steer."""
    if scope["type"] != "http" or scope["method"] != "GET":
        return False
    query = urllib.parse.parse_qs(scope["query_string"].decode("latin-1"))
    try:
        return presenter.KEY_PARAMETER in query and presenter.key_from_environment() is not None
    except ValueError:  # a weak key: nobody steers, so nobody needs the cookie
        return False


class SetsToken:
    """ASGI middleware: a response to the presenter URL sets a cookie of a new token."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _asks_key(scope):
            await self.app(scope, receive, send)
            return

        async def with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).append("set-cookie", _set_cookie())
            await send(message)

        await self.app(scope, receive, with_cookie)


def _with_token(create: Callable[[], list[Middleware]]) -> Callable[[], list[Middleware]]:
    """Streamlit's `create_streamlit_middleware`, `SetsToken` last (innermost)."""

    @functools.wraps(create)
    def middleware(*args: Any, **kwargs: Any) -> list[Middleware]:
        return [*create(*args, **kwargs), Middleware(SetsToken)]

    return middleware


def install() -> None:
    """Has the server that Streamlit starts next in this process set the cookie; before
    it starts (its app takes the middleware as it is made)."""
    starlette_app.create_streamlit_middleware = _with_token(  # type: ignore[assignment]
        starlette_app.create_streamlit_middleware
    )
