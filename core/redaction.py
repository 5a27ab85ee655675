"""Secrets out of messages: `redacted`, which every message that may quote a store's or a
sweep storage's URL passes through (the store's and the sweeps' errors, Optuna's and the
database driver's among them, the command line's output, the pages).

A database URL carries secrets in two places: the password of its user information
(`postgresql://lab:PASSWORD@host/db`) and parameters such as libpq's `password`,
`sslpassword` and `passfile` (`?password=...`, a name in any case, percent-encoded or not;
also in libpq's `key=value` form). libpq's errors quote the part of a URL they cannot
parse (`invalid percent-encoded token: "50%off"`): so a message loses the secrets of the
URLs it quotes and of those it was made about, wherever they stand in it.
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
# A URL: its scheme, then up to its query; its user information ends at the last `@`.
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*:/+(?P<rest>[^\s?#]*)")
# `name=value`, in a URL's query or libpq's `key=value` form: a value quoted, or up to the
# next `&`, `#` or blank.
_PARAMETER = re.compile(
    r"(?P<name>[\w%.-]+)\s*=\s*(?P<value>'(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^\s&#]*)"
)
# Around a secret: no letter or digit (so a short password does not mask parts of words).
_ALONE = r"(?<![A-Za-z0-9]){}(?![A-Za-z0-9])"


def redacted(text: str, *locations: str | os.PathLike[str]) -> str:
    """`text` with `MASK` for every secret of a URL it quotes, and of each of `locations`
    (the URLs it was made about), as written and percent-decoded."""
    found = _secrets(text).union(*(_secrets(os.fspath(location)) for location in locations))
    for secret in sorted(found, key=len, reverse=True):  # a secret inside another: after it
        text = re.sub(_ALONE.format(re.escape(secret)), MASK, text)
    return text


def _secrets(text: str) -> set[str]:
    """The passwords and secret parameters' values of the URLs (and libpq `key=value`
    strings) in `text`."""
    found = set()
    for url in _URL.finditer(text):
        user_info, at, _ = url["rest"].rpartition("@")
        if at and (password := user_info.partition(":")[2]):
            found.add(password)
    for parameter in _PARAMETER.finditer(text):
        value = parameter["value"].strip("'\"")
        if value and _SECRET_NAME.search(unquote(parameter["name"])):
            found.add(value)
    return found | {unquote(secret) for secret in found}
