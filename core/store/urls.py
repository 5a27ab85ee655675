"""A PostgreSQL store's URL, read once, in one place, before anything else reads it.

libpq, Python's `urllib.parse`, SQLAlchemy (the sweeps' Optuna storage) and
`core.redaction` each read a URL their own way, and they disagree where it is malformed:
libpq ends a password at its first '@', the others at the last; '#' starts a fragment for
Python and is a plain character for libpq; `postgresql://lab:PASSWORD/optlab` (the host
forgotten) is Python's host `lab` on port PASSWORD. Their errors then quote what they
could not read, a password included, in a traceback. So `parse` takes a store's URL only
in the form they all read alike, `postgresql://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE
[?NAME=VALUE&...]`, and refuses any other with a `LocationError` that says what is wrong
and where, quoting no part of the URL: a secret typed in the wrong place may be in any.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass
from typing import NoReturn
from urllib.parse import unquote

from core.store.errors import LocationError

#: The URL's form, for errors; written apart, as `core.redaction` would mask a whole URL's
#: PASSWORD.
FORM = "postgresql:// then USER:PASSWORD@HOST:PORT/DATABASE"

# What libpq refuses unencoded: a blank (it says "use %20") and control characters.
_BLANK = re.compile(r"[\s\x00-\x1f\x7f]")
# A '%' that starts no byte, or the byte 0, which libpq forbids.
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})|%00")
# The parts after the scheme: user information and host, then the path, then the query.
_PARTS = re.compile(r"//(?P<authority>[^/?]*)(?P<path>[^?]*)(?:\?(?P<query>.*))?", re.DOTALL)
# Where the store's server is, when the URL names no host (a local socket's folder).
_HOST_PARAMETERS = ("host", "hostaddr")


@dataclass(frozen=True)
class PostgresURL:
    """The parts of a store's URL that the lab reads itself (libpq reads the rest).

    Attributes:
        host: The host as written (percent-encoded, without an IPv6 address's
            brackets), '' when the query names it.
        port: The port, if the URL gives one after its host.
        database: The database as written (percent-encoded), '' when the query names it.
        parameters: The query's parameters, decoded, in order.
    """

    host: str
    port: int | None
    database: str
    parameters: tuple[tuple[str, str], ...]

    def parameter(self, name: str) -> list[str]:
        """The values of the query's parameter `name`, in order."""
        return [value for key, value in self.parameters if key == name]


def parse(url: str) -> PostgresURL:
    """The parts of `url`, a PostgreSQL URL in any scheme's spelling (`postgresql://`,
    `postgres://`, ...). Raises `LocationError` (field `store`) for one that libpq and
    the other readers would not read alike or not at all: a blank or a bad
    percent-encoding anywhere, a '#', an '@' out of place, several hosts, brackets that
    do not hold an IPv6 address, a port that is not from 1 to 65535, no host or no
    database, a query parameter that libpq does not take."""
    _, _, rest = url.partition(":")
    if _BLANK.search(rest):
        _refuse("holds a blank or a control character: percent-encode it (a blank is %20)")
    if _BAD_ESCAPE.search(rest):
        _refuse("holds a '%' that begins no percent-encoded byte, or %00: write a '%' as %25")
    if "#" in rest:
        _refuse("holds a '#': percent-encode it as %23 (a store's URL has no fragment)")
    parts = _PARTS.fullmatch(rest)
    if parts is None:
        _refuse(f"lacks the '//' after its scheme: write {FORM}")
    names = [item.partition("=")[0] for item in (parts["query"] or "").split("&")]
    if "@" in parts["path"] or any("@" in name for name in names):
        # Past a '/' (libpq) or a '?' (Python), an '@' no longer ends a user's information.
        _refuse(
            "holds an '@' after a '/' or '?': percent-encode them in a user, password or "
            "database ('/' as %2F, '?' as %3F, '@' as %40)"
        )
    user_info, at, host_port = parts["authority"].rpartition("@")
    if "@" in user_info:
        _refuse("holds more than one '@' before its host: percent-encode an '@' as %40")
    parameters = _parameters(parts["query"])
    host, port = _host_port(host_port, password_given=bool(at))
    if not host and not any(name in _HOST_PARAMETERS for name, _ in parameters):
        _refuse(f"names no host: write {FORM} (a local socket's folder as ?host=/PATH)")
    database = parts["path"].removeprefix("/")
    if not database and not any(name == "dbname" for name, _ in parameters):
        _refuse(f"names no database: write {FORM}")
    return PostgresURL(host, port, database, parameters)


def _host_port(text: str, *, password_given: bool) -> tuple[str, int | None]:
    """The host (an IPv6 address without its brackets) and the port of `text`, what
    follows the user information."""
    if "," in text:
        _refuse("names several hosts: give one (the store's side files are named after it)")
    if text.startswith("["):
        address, closed, after = text[1:].partition("]")
        if not closed:
            _refuse("opens an IPv6 address with '[' and no ']' closes it")
        if not _is_ipv6(address):
            _refuse("holds no IPv6 address between its '[' and ']'")
        if after and not after.startswith(":"):
            _refuse("holds more than ':PORT' after its IPv6 address's ']'")
        port = after[1:] if after else None
    else:
        if "[" in text or "]" in text:
            _refuse("holds a '[' or ']' out of place: an IPv6 host is written [ADDRESS]")
        address, colon, written = text.partition(":")
        port = written if colon else None
    if port is None:
        return address, None
    if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        hint = "" if password_given else "; a password ends at an '@' before the host"
        _refuse(f"has a port that is no number from 1 to 65535 after its host{hint}: {FORM}")
    return address, int(port)


def _is_ipv6(address: str) -> bool:
    """Whether `address` (with a zone, `%25eth0`, or not) is an IPv6 address."""
    try:
        ipaddress.IPv6Address(address.partition("%")[0])
    except ValueError:
        return False
    return True


def _parameters(query: str | None) -> tuple[tuple[str, str], ...]:
    """The query's parameters, decoded; each must be `NAME=VALUE` of a name libpq takes
    (its error quotes any other name, which may be a secret typed in the wrong place)."""
    if not query:
        return ()
    items = query.split("&")
    if len(items) > 1 and items[-1] == "":
        items.pop()  # a last '&', which libpq allows
    parameters = []
    for number, item in enumerate(items, 1):
        name, equals, value = item.partition("=")
        if not name or not equals or "=" in value:
            _refuse(f"has a query parameter (number {number}) that is not NAME=VALUE")
        name, value = unquote(name), unquote(value)
        if name not in _libpq_parameters():
            _refuse(f"has a query parameter (number {number}) that libpq does not take")
        if name == "port" and not (
            value.isascii() and value.isdigit() and 1 <= int(value) <= 65535
        ):
            _refuse("has a port parameter that is no number from 1 to 65535")
        if name in _HOST_PARAMETERS and "," in value:
            _refuse("names several hosts: give one (the store's side files are named after it)")
        parameters.append((name, value))
    return tuple(parameters)


@functools.cache
def _libpq_parameters() -> frozenset[str]:
    """The names of libpq's connection parameters, as the libpq in use knows them."""
    from psycopg import pq  # imported for a PostgreSQL store only

    return frozenset(option.keyword.decode() for option in pq.Conninfo.get_defaults())


def _refuse(why: str) -> NoReturn:
    raise LocationError(f"the PostgreSQL URL {why}")
