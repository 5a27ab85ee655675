"""A store's URL that cannot be used is refused at every entry point (`--store`,
`OPTLAB_STORE`, `optlab present`, the dashboard): exit status 2, the field `store` named,
a reason, no traceback, and never a secret, wherever in the URL it was typed. The CLI
runs in this process (`tests.cli.run_main`); no URL here reaches a database: connecting
fails the test."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from urllib.parse import unquote

import psycopg
import pytest
import streamlit
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from core.store import LocationError, Store, canonical
from tests.apptest import page
from tests.cli import run_main

# The issue's URLs: a password without its host (its password read as a port), a port out
# of range, an IPv6 address never closed. Each ended in a traceback, the first quoting the
# password ("Port could not be cast to integer value as 's3cr3tPW'").
ISSUE = (
    "postgresql://lab:s3cr3tPW/optlab",
    "postgresql://lab:s3cr3tPW@db.example:99999/optlab",
    "postgresql://lab:s3cr3tPW@[::1:5599/optlab",
)
# A few commands of each kind: those that read the store, that train, that serve it.
COMMANDS = (
    ["runs"],
    ["export", "r1", "--csv", "out.csv"],
    ["delete", "r1"],
    ["train", "--model", "mlp", "--dataset", "digits", "--max-steps", "2"],
    ["sweep", "--param", "learning_rate=0.01:0.1", "--trials", "1"],
    ["serve"],
    ["present", "--address", "127.0.0.1"],
)
SCHEMES = ("postgresql", "postgres", "postgresql+psycopg", "PostgreSQL")
# What may stand before a secret in its place: characters a URL reads apart, and bad
# percent-encodings.
ODD = ("", "%", "%zz", "%00", "%40", "@", "/", "?", "#", ":", "[", "]", "&", "=", " ", "\t")
# Where a secret may be typed, each a function of (the URL's parts, the secret's text).
PLACES = {
    "user": lambda parts, text: parts | {"user": text},
    "password": lambda parts, text: parts | {"password": text},
    "password with an '@'": lambda parts, text: parts | {"password": f"p@{text}"},
    "host": lambda parts, text: parts | {"host": text},
    "port": lambda parts, text: parts | {"port": text},
    "database": lambda parts, text: parts | {"database": text},
    "password parameter": lambda parts, text: parts | {"query": f"?password={text}"},
    "sslpassword parameter": lambda parts, text: parts | {"query": f"?sslpassword={text}"},
    "parameter's name": lambda parts, text: parts | {"query": f"?{text}=1"},
    "parameter without a value": lambda parts, text: parts | {"query": f"?{text}"},
}  # fmt: skip
# What makes the URL one that cannot be used, whatever the secret's place.
FLAWS = {
    "port out of range": lambda parts: parts | {"port": "99999"},
    "port zero": lambda parts: parts | {"port": "0"},
    "port not a number": lambda parts: parts | {"port": "54x"},
    "IPv6 address never closed": lambda parts: parts | {"host": "[::1"},
    "IPv6 address never opened": lambda parts: parts | {"host": "::1]"},
    "no IPv6 address in brackets": lambda parts: parts | {"host": "[db]"},
    "several hosts": lambda parts: parts | {"host": "db1,db2"},
    "no host": lambda parts: parts | {"host": ""},
    "no database": lambda parts: parts | {"database": ""},
    "a fragment": lambda parts: parts | {"database": parts["database"] + "#x"},
    "a blank": lambda parts: parts | {"database": parts["database"] + " x"},
    "a bad percent-encoding": lambda parts: parts | {"database": parts["database"] + "%g1"},
    "an unknown parameter": lambda parts: parts | {"query": f"?no=1&{parts['query'][1:]}"},
    "a parameter without '='": lambda parts: parts | {"query": (parts["query"] or "?a=1") + "&&"},
}  # fmt: skip
PARTS = {
    "user": "lab",
    "password": "pw",
    "host": "db.example",
    "port": "5432",
    "database": "optlab",
    "query": "",
}


def assembled(scheme: str, parts: dict[str, str]) -> str:
    return (
        f"{scheme}://{parts['user']}:{parts['password']}@{parts['host']}:{parts['port']}"
        f"/{parts['database']}{parts['query']}"
    )


def without_host(scheme: str, parts: dict[str, str]) -> str:
    """The issue's URL: `USER:PASSWORD/DATABASE`, its password where a port would be."""
    return f"{scheme}://{parts['user']}:{parts['password']}/{parts['database']}{parts['query']}"


@st.composite
def unusable_urls(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A store URL that cannot be used, and the forms of the secret it holds: as typed,
    and percent-decoded when typed percent-encoded."""
    secret = "s3cr3t" + draw(st.from_regex(r"[A-Za-z0-9]{2,8}", fullmatch=True))
    encoded = draw(st.booleans())
    typed = "".join(f"%{ord(c):02X}" for c in secret) if encoded else secret
    place = draw(st.sampled_from(sorted(PLACES)))
    parts = PLACES[place](PARTS, draw(st.sampled_from(ODD)) + typed)
    scheme = draw(st.sampled_from(SCHEMES))
    if draw(st.booleans()) and "@" not in parts["password"]:
        # (With an '@' in the password, the host is what follows it: a URL to use.)
        url = without_host(scheme, parts)
    else:
        url = assembled(scheme, FLAWS[draw(st.sampled_from(sorted(FLAWS)))](parts))
    assume(typed in url)  # the flaw did not overwrite it
    return url, [secret, typed]


@contextlib.contextmanager
def lab_without_a_database() -> Iterator[str]:
    """A folder to run commands in, nothing else in the environment's store, and a
    PostgreSQL driver that fails the test if anything tries to connect."""

    def connect(*args: object, **kwargs: object) -> None:
        raise AssertionError("a URL that cannot be used reached the database driver")

    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.delenv("OPTLAB_STORE", raising=False)
        patch.setattr(psycopg, "connect", connect)
        yield folder


def refused(command: list[str], url: str, *, through_environment: bool) -> str:
    """The command's stderr, once it has refused the store `url` as bad input, named."""
    if through_environment:
        os.environ["OPTLAB_STORE"] = url
        try:
            code, out, err = run_main(*command)
        finally:
            del os.environ["OPTLAB_STORE"]
    else:
        code, out, err = run_main(*command, "--store", url)
    assert code == 2, (command, url, out, err)
    assert err.startswith("error: store: the PostgreSQL URL "), (command, url, err)
    assert "Traceback" not in out + err and out == ""
    return err


@pytest.mark.parametrize("url", ISSUE)
def test_the_issues_urls_are_refused_naming_the_store_without_the_password(url: str) -> None:
    with lab_without_a_database() as folder:
        for command in COMMANDS:
            for through_environment in (False, True):
                err = refused(command, url, through_environment=through_environment)
                assert "s3cr3t" not in err, err
        assert os.listdir(folder) == []  # nothing written: no store, no export


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    unusable_urls(),
    st.sampled_from(COMMANDS),
    st.booleans(),
)
def test_a_secret_anywhere_in_an_unusable_url_is_never_shown(
    url_and_secret: tuple[str, list[str]], command: list[str], through_environment: bool
) -> None:
    url, secrets = url_and_secret
    with lab_without_a_database():
        err = refused(command, url, through_environment=through_environment)
    for secret in secrets:
        assert secret not in err and unquote(secret) not in err, (url, err)


def test_the_pages_show_a_store_url_that_cannot_be_used_as_a_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The dashboard reads `OPTLAB_STORE`: it says why the store cannot be used, in a
    message, without the password, and shows no traceback."""
    monkeypatch.setenv("OPTLAB_STORE", ISSUE[0])
    streamlit.cache_resource.clear()
    try:
        at = page().run()
    finally:
        streamlit.cache_resource.clear()
    assert not at.exception, [e.value for e in at.exception]
    (error,) = [e.value for e in at.error]  # Markdown: its ':' escaped
    assert error.startswith("The lab's store cannot be used: store\\: the PostgreSQL URL has")
    assert "s3cr3t" not in str(at._tree) and "Traceback" not in str(at._tree)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://lab:pw@[::1]:5433/optlab",
        "postgresql://lab:pw@[fe80::1%25eth0]/optlab",
        "postgresql://lab:p%40ss%2Fw%3F@db:5432/optlab",
        "postgresql:///optlab?host=/var/run/postgresql",
        "postgresql://%2Fvar%2Frun%2Fpostgresql/optlab",
        "postgresql://db/optlab?options=-csearch_path%3Dteam&",
        "postgresql://db?dbname=optlab&port=5433",
        "postgresql://lab:pa:ss[]@db/optlab",
    ],
)
def test_urls_libpq_reads_as_meant_are_taken(url: str) -> None:
    """What libpq reads as meant is taken (and read as `psycopg` reads it)."""
    assert canonical(url) == url
    psycopg.conninfo.conninfo_to_dict(url)  # raises for what libpq cannot read


def test_a_store_is_refused_before_anything_reads_its_url(tmp_path) -> None:
    """`Store` itself, as every part of the lab opens it."""
    with pytest.raises(LocationError) as raised:
        Store(ISSUE[0])
    assert raised.value.errors.keys() == {"store"} and "s3cr3tPW" not in str(raised.value)
