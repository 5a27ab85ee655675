"""A store's location is read in one way (`core.store.canonical`): PostgreSQL URLs in each
spelling users write, SQLAlchemy's `sqlite:///PATH`, or a path; anything else that looks
like a URL is refused, naming `store`, before a file or folder is made after it (a
password included)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.knobs import InvalidInput
from core.store import LocationError, Store, StoreError, canonical, default_location


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("postgresql://lab:pw@db:5432/lab", "postgresql://lab:pw@db:5432/lab"),
        ("postgres://lab@db/lab?options=-csearch_path%3Dteam", "postgresql://lab@db/lab?options=-csearch_path%3Dteam"),
        ("postgresql+psycopg://lab:pw@db/lab", "postgresql://lab:pw@db/lab"),
        ("PostgreSQL://lab@db/lab", "postgresql://lab@db/lab"),
        ("sqlite:///runs/lab.sqlite", "runs/lab.sqlite"),
        ("sqlite:////tmp/lab.sqlite", "/tmp/lab.sqlite"),
        ("sqlite:///odd:name.sqlite", "./odd:name.sqlite"),
        ("lab.sqlite", "lab.sqlite"),
        ("./odd:name.sqlite", "./odd:name.sqlite"),
        (Path("/tmp/lab.sqlite"), "/tmp/lab.sqlite"),
    ],
)  # fmt: skip
def test_a_location_is_read_one_way(location: str | Path, expected: str) -> None:
    assert canonical(location) == expected
    assert canonical(expected) == expected  # as another process reads it again


def test_a_location_starting_with_a_home_folder_is_expanded() -> None:
    assert canonical("~/lab.sqlite") == str(Path.home() / "lab.sqlite")
    assert canonical("sqlite:///~/lab.sqlite") == str(Path.home() / "lab.sqlite")


REFUSED = [
    "postgresql+psycopg:/lab:s3cr3t@host:1/optlab",  # what a path's normalization leaves
    "postgresql+psycopg2://lab:s3cr3t@host/optlab",  # a driver the lab does not use
    "mysql://lab:s3cr3t@host/optlab",
    "lab:s3cr3t@host:1/optlab",  # the scheme forgotten
    "sqlite://",  # in memory
    "sqlite:///:memory:",
    "sqlite:///lab.sqlite?mode=ro&password=s3cr3t",
]


@pytest.mark.parametrize("location", REFUSED)
def test_a_location_that_is_no_stores_is_refused_and_nothing_is_made(
    location: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LocationError) as raised:
        Store(location)
    assert raised.value.errors.keys() == {"store"}
    assert isinstance(raised.value, InvalidInput) and isinstance(raised.value, StoreError)
    assert "s3cr3t" not in str(raised.value)
    monkeypatch.setenv("OPTLAB_STORE", location)
    with pytest.raises(LocationError):
        default_location()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("location", "reason"),
    [
        ("postgresql://lab:s3cr3t/optlab", "after its host; a password ends at an '@'"),
        ("postgresql://lab:s3cr3t@db:99999/optlab", "no number from 1 to 65535 after its host:"),
        ("postgresql://lab:s3cr3t@db:0/optlab", "port that is no number"),
        ("postgresql://lab:s3cr3t@db:/optlab", "port that is no number"),
        ("postgresql://lab:s3cr3t@::1/optlab", "port that is no number"),
        ("postgresql://lab:s3cr3t@[::1:5599/optlab", "with '[' and no ']' closes it"),
        ("postgresql://lab:s3cr3t@[db]/optlab", "no IPv6 address between its '[' and ']'"),
        ("postgresql://lab:s3cr3t@[::1]x/optlab", "more than ':PORT' after its IPv6 address's ']'"),
        ("postgresql://lab:s3cr3t@db]/optlab", "'[' or ']' out of place"),
        ("postgresql://lab:s3cr3t@db1,db2/optlab", "names several hosts"),
        ("postgresql://lab:s3cr3t@db/optlab?host=a,b", "names several hosts"),
        ("postgresql://lab:s3cr3t@/optlab", "names no host"),
        ("postgresql://lab:s3cr3t@db", "names no database"),
        ("postgresql://lab:s3cr3t@db/", "names no database"),
        ("postgresql://lab:p@s3cr3t@db/optlab", "more than one '@' before its host"),
        ("postgresql://lab:p/s3cr3t@db/optlab", "an '@' after a '/' or '?'"),
        ("postgresql://lab:p?s3cr3t@db/optlab", "an '@' after a '/' or '?'"),
        ("postgresql://lab:p#s3cr3t@db/optlab", "holds a '#'"),
        ("postgresql://lab:p s3cr3t@db/optlab", "holds a blank"),
        ("postgresql://lab:50%s3cr3t@db/optlab", "a '%' that begins no percent-encoded byte"),
        ("postgresql://lab:a%00s3cr3t@db/optlab", "or %00: write a '%' as %25"),
        ("postgresql://db/optlab?s3cr3t", "query parameter (number 1) that is not NAME=VALUE"),
        ("postgresql://db/optlab?sslmode=disable&&password=s3cr3t", "(number 2) that is not"),
        ("postgresql://db/optlab?s3cr3t=1", "query parameter (number 1) that libpq does not take"),
        ("postgresql://db/optlab?port=s3cr3t", "port parameter that is no number"),
    ],
)  # fmt: skip
def test_a_postgresql_url_that_libpq_would_not_read_as_meant_is_refused_saying_why(
    location: str, reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused whole before anything parses it, with a reason that quotes no part of it."""
    with pytest.raises(LocationError, match=re.escape(reason)) as raised:
        canonical(location)
    assert "s3cr3t" not in str(raised.value)
    monkeypatch.setenv("OPTLAB_STORE", location)
    with pytest.raises(LocationError, match=r"\(in \$OPTLAB_STORE\)$") as raised:
        default_location()
    assert "s3cr3t" not in str(raised.value)


def test_a_url_without_its_scheme_is_refused_without_quoting_its_user() -> None:
    """`USER:PASSWORD@HOST`: what stands before the ':' is no scheme, and may be a secret."""
    with pytest.raises(LocationError, match="starts like a URL") as raised:
        canonical("s3cr3t:pw@db/optlab")
    assert "s3cr3t" not in str(raised.value)
