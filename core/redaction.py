"""Secrets out of messages: `redacted`, which every message that may quote a store's or a
sweep storage's URL passes through (the store's and the sweeps' errors, Optuna's and the
database driver's among them, the command line's output, the pages).

A database URL carries secrets in two places: the password of its user information
(`postgresql://lab:PASSWORD@host/db`) and parameters such as libpq's `password`,
`sslpassword` and `passfile` (`?password=...`, a name in any case, percent-encoded or not;
also in libpq's `key=value` form). libpq's errors quote the part of a URL they cannot
parse (`invalid percent-encoded token: "50%off"`, `unexpected spaces found in "..."`): so
a message loses the secrets of the URLs it quotes and of those it was made about,
wherever they stand in it.
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote

#: What a message shows instead of a secret.
MASK = "***"

# A parameter whose value is a secret: libpq's `password`, `sslpassword`, `passfile`, and
# any other name of the kind.
_SECRET_NAME = re.compile(r"pass|pwd|secret|token|credential", re.IGNORECASE)
# A URL in a message: its scheme, then up to its query or a blank; its user information
# ends at the last `@`.
_URL_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*:/+(?P<rest>[^\s?#]*)")
# `name=value` in a message, from a URL's query or libpq's `key=value` form: a value
# quoted, or up to the next `&`, `#` or blank.
_PARAMETER_IN_TEXT = re.compile(
    r"(?P<name>[\w%.-]+)\s*=\s*(?P<value>'(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^\s&#]*)"
)
# A URL that a message is about: the whole text, blanks included, and its query.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:/+(?P<rest>[^?#]*)(?:\?(?P<query>[^#]*))?")
_PARAMETER = re.compile(r"(?P<name>[^&=]+)=(?P<value>[^&]*)")
# Around a secret: no letter or digit (so a short password does not mask parts of words).
_ALONE = r"(?<![A-Za-z0-9]){}(?![A-Za-z0-9])"


def redacted(text: str, *locations: str | os.PathLike[str]) -> str:
    """`text` with `MASK` for every secret of a URL it quotes, and of each of `locations`
    (the URLs it was made about), as written and percent-decoded."""
    found = _quoted_secrets(text).union(*(_secrets_of(os.fspath(url)) for url in locations))
    for secret in sorted(found | {unquote(secret) for secret in found}, key=len, reverse=True):
        text = re.sub(_ALONE.format(re.escape(secret)), MASK, text)  # the longest first
    return text


def _quoted_secrets(text: str) -> set[str]:
    """The secrets of the URLs and libpq `key=value` strings quoted in `text`."""
    found = {_password(url["rest"]) for url in _URL_IN_TEXT.finditer(text)}
    found |= {
        parameter["value"].strip("'\"")
        for parameter in _PARAMETER_IN_TEXT.finditer(text)
        if _SECRET_NAME.search(unquote(parameter["name"]))
    }
    return found - {""}


def _secrets_of(location: str) -> set[str]:
    """The secrets of `location`, a URL (a path has none)."""
    url = _URL.fullmatch(location)
    if url is None:
        return set()
    found = {_password(url["rest"])}
    found |= {
        parameter["value"]
        for parameter in _PARAMETER.finditer(url["query"] or "")
        if _SECRET_NAME.search(unquote(parameter["name"]))
    }
    return found - {""}


def _password(rest: str) -> str:
    """The password in what follows a URL's scheme (`user:password@host/...`), or ''."""
    user_info, at, _ = rest.rpartition("@")
    return user_info.partition(":")[2] if at else ""
