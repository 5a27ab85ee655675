"""A live demo to a room: the presenter's key, the role it gives a session, and the URLs
and QR code that `optlab present` prints.

The dashboard served by `optlab present` listens on every interface. A session that shows
the presenter's key (in the presenter URL, once; the session then keeps it) steers runs; any
other session is a viewer, which reads and never writes. Without a key (`make run`, on
127.0.0.1) every session is the presenter, as one person's lab has always been.

The key is made at each start (or taken from `OPTLAB_PRESENTER_KEY`) and compared in
constant time; `optlab present` prints it once, inside the presenter URL, as Jupyter prints
its token, and hands it to the dashboard process in its environment, never on a command
line that `ps` shows.
"""

from __future__ import annotations

import enum
import hmac
import io
import os
import secrets
import socket
import urllib.parse
from collections.abc import Mapping

import segno

#: The environment variable that holds the presenter's key, for `optlab present` to take
#: and for the dashboard it starts to read.
KEY_VARIABLE = "OPTLAB_PRESENTER_KEY"
#: The query parameter of the presenter URL that carries the key.
KEY_PARAMETER = "key"
#: The least a key given in `OPTLAB_PRESENTER_KEY` may be, in characters.
SHORTEST_KEY = 16
#: The fewest different characters such a key may hold. Sixteen random characters of the
#: URL-safe alphabet (`openssl rand -base64 12`) hold 11 or more 99 times in 100; a key
#: with fewer repeats a short pattern (`abcdabcd…`, sixteen `a`s) or a word twice
#: (`passwordpassword`: 7), the first things a guesser tries.
FEWEST_DISTINCT = 10
#: What a chosen key needs, as its error says it.
KEY_NEEDS = (
    f"a key needs at least {SHORTEST_KEY} characters, at least {FEWEST_DISTINCT} of them "
    f"different; unset {KEY_VARIABLE} for a new random key at each start"
)


class Role(enum.Enum):
    """What a session may do: a presenter steers, a viewer watches."""

    PRESENTER = "presenter"
    VIEWER = "viewer"


def new_key() -> str:
    """A fresh key: 32 random bytes, URL-safe."""
    return secrets.token_urlsafe(32)


def key_from_environment() -> str | None:
    """The key the dashboard was started with, or None when it presents to no room.
    Raises `ValueError` naming the variable when it is set but weak (`checked_key`)."""
    key = os.environ.get(KEY_VARIABLE)
    return None if key is None else checked_key(key)


def checked_key(key: str) -> str:
    """`key` if it is strong enough to steer a room; else a `ValueError` that names the
    variable and says what a key needs, and never quotes the key.

    A chosen key is judged by its length and its different characters, what a person's
    weak choices lack (sixteen `a`s has 16 characters, 1 of them different); the key
    made at each start (`new_key`, 256 random bits) always passes."""
    distinct = len(set(key))
    if len(key) < SHORTEST_KEY or distinct < FEWEST_DISTINCT:
        raise ValueError(
            f"{KEY_VARIABLE}: {KEY_NEEDS} (this one has {len(key)}, {distinct} different)"
        )
    return key


def without_key(environment: Mapping[str, str]) -> dict[str, str]:
    """`environment` less the key: what the dashboard hands the processes it starts (the
    engine), which steer nothing and so have no need of it."""
    return {name: value for name, value in environment.items() if name != KEY_VARIABLE}


def role_of(given: str | None, key: str | None) -> Role:
    """The role of a session that showed `given` (None: nothing), where the presenter's
    key is `key` (None: no room, everyone presents). Compared in constant time."""
    if key is None:
        return Role.PRESENTER
    if given is not None and hmac.compare_digest(given.encode(), key.encode()):
        return Role.PRESENTER
    return Role.VIEWER


def room_address() -> str:
    """The address other machines on the network reach this one at: that of the
    interface a packet to the outside would leave by (no packet is sent), else the
    loopback address when the machine has no network."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: routed, never answered
            return probe.getsockname()[0]
        except OSError:
            return "127.0.0.1"


#: The addresses a server listens on to serve every interface.
EVERY_INTERFACE = ("0.0.0.0", "::")


def room_host(address: str) -> str:
    """The host the room reaches a server listening on `address` at, as a URL writes it:
    this machine's network address for every interface, else `address` itself."""
    host = room_address() if address in EVERY_INTERFACE else address
    return f"[{host}]" if ":" in host else host


def audience_url(host: str, port: int) -> str:
    """The URL the room opens."""
    return f"http://{host}:{port}/"


def presenter_url(host: str, port: int, key: str) -> str:
    """The URL only the presenter opens: the audience URL with the key."""
    return f"{audience_url(host, port)}?{urllib.parse.urlencode({KEY_PARAMETER: key})}"


def qr_terminal(url: str) -> str:
    """`url` as a QR code drawn in text, two modules a character, for a terminal."""
    out = io.StringIO()
    segno.make(url, error="m").terminal(out=out, compact=True, border=2)
    return out.getvalue()


def qr_svg(url: str, scale: int = 6) -> str:
    """`url` as a QR code in SVG, dark on light, for a page."""
    out = io.BytesIO()
    segno.make(url, error="m").save(out, kind="svg", scale=scale, border=2, xmldecl=False)
    return out.getvalue().decode()
