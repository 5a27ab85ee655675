"""A store's location is read in one way (`core.store.canonical`): PostgreSQL URLs in each
spelling users write, SQLAlchemy's `sqlite:///PATH`, or a path; anything else that looks
like a URL is refused, naming `store`, before a file or folder is made after it (a
password included)."""

from __future__ import annotations

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
