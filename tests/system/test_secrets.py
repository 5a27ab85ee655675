"""A store's password reaches no message: the command line's output, the store's errors,
the sweeps' (Optuna's and SQLAlchemy's included) and the Sweep page. Against a real
PostgreSQL server, with a role that logs in only with its password, so that the errors
are the driver's own: a wrong password, a database that is gone, a URL libpq cannot parse
(the lab refuses it first: libpq's error quotes the part it cannot read, the password
too), a role that may use the lab's tables but not create Optuna's."""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest

from core.engine import Engine, RunConfig
from core.knobs import InvalidInput
from core.store import Store, StoreError
from core.sweep import SearchSpace, Sweep, list_studies
from tests.apptest import page
from tests.cli import run_main
from tests.conftest import app_serving
from tests.lean import NO_INSTRUMENTS_FLAGS
from ui import nav

# The role's password: a `%` and a blank, which a URL must percent-encode. Typed as it is,
# libpq refuses the URL quoting it; any message holding "s3cr3t" shows it, in any form.
PASSWORD = "s3cr3t%2 x"
SECRET = "s3cr3t"
TRAIN = ["--model", "mlp", "--dataset", "digits", "--max-steps", "4", *NO_INSTRUMENTS_FLAGS]
SWEEP = ["--param", "learning_rate=0.01:0.1", "--trials", "1", "--parallel", "1", *TRAIN]


@pytest.fixture
def role_url(postgres) -> str:
    """The URL of a schema of its own, as a role that must give `PASSWORD`."""
    return postgres.create_role(PASSWORD)


def bad_urls(url: str) -> dict[str, tuple[str, str]]:
    """Stores that cannot be used, each with the reason the driver gives."""
    encoded = urlsplit(url).password
    assert encoded is not None
    return {
        "wrong password": (
            url.replace(encoded, f"{SECRET}-wrong"),
            "password authentication failed",
        ),
        # Refused before libpq reads it: its error would quote the password.
        "typed unencoded": (url.replace(encoded, PASSWORD), "the PostgreSQL URL holds a blank"),
        "password as a parameter, no database": (
            url.replace(f":{encoded}@", "@").replace("/postgres?", f"/gone?password={encoded}&"),
            'database "gone" does not exist',
        ),
    }


def test_no_command_shows_the_password(role_url, tmp_path, monkeypatch) -> None:
    """`runs`, `train` and `sweep` on a store that cannot be used: exit 2, the driver's
    reason, no password; on the store, under the scheme SQLAlchemy's users write
    (`postgresql+psycopg://`), each works and shows none either."""
    monkeypatch.chdir(tmp_path)
    for store, reason in bad_urls(role_url).values():
        for command in (["runs"], ["train", *TRAIN], ["sweep", *SWEEP]):
            code, out, err = run_main(*command, "--store", store)
            assert (code, SECRET in out + err) == (2, False), (command, err)
            assert reason in err, err
    store = role_url.replace("postgresql://", "postgresql+psycopg://")
    for command in (["train", *TRAIN], ["sweep", *SWEEP], ["runs"]):
        code, out, err = run_main(*command, "--store", store)
        assert (code, SECRET in out + err) == (0, False), (command, err)
    assert list(tmp_path.iterdir()) == []


def test_a_store_url_taken_apart_by_a_path_is_refused_and_makes_no_folder(
    role_url, tmp_path, monkeypatch
) -> None:
    """`postgresql+psycopg:/role:PASSWORD@...`, as a path's normalization leaves it (it
    trained on a new SQLite file in a folder named with the password)."""
    monkeypatch.chdir(tmp_path)
    store = role_url.replace("postgresql://", "postgresql+psycopg:/")
    for command in (["train", *TRAIN], ["runs"], ["sweep", *SWEEP]):
        code, out, err = run_main(*command, "--store", store)
        assert code == 2 and "store: postgresql+psycopg:... is not a store's URL" in err
        assert SECRET not in out + err
    assert list(tmp_path.iterdir()) == []


def test_the_stores_errors_show_no_password(role_url) -> None:
    for store, reason in bad_urls(role_url).values():
        with pytest.raises(StoreError, match=reason) as raised:
            Store(store)
        assert SECRET not in "".join(traceback.format_exception(raised.value))


@pytest.fixture
def engine(tmp_path) -> Iterator[Engine]:
    engine = Engine(tmp_path / "lab.sqlite")
    yield engine
    engine.close()


def sweep(engine: Engine, storage: str) -> Sweep:
    base = RunConfig(model="mlp", dataset="digits", max_steps=4)
    space = SearchSpace.from_rows([{"name": "learning_rate", "low": 0.01, "high": 0.1}])
    return Sweep(engine, base, space, storage=storage, n_trials=1)


def test_the_sweeps_errors_show_no_password(role_url, engine) -> None:
    """An Optuna storage that cannot be opened, and a study it does not hold."""
    storage = role_url.replace("postgresql://", "postgresql+psycopg://")
    for name, (url, reason) in bad_urls(storage).items():
        if name == "typed unencoded":
            continue  # SQLAlchemy reads it as meant
        with pytest.raises(InvalidInput, match=reason) as started:
            sweep(engine, url).start()
        with pytest.raises(InvalidInput, match=reason) as listed:
            list_studies(engine, url)
        for raised in (started, listed):
            assert raised.value.errors.keys() == {"storage"}
            assert SECRET not in "".join(traceback.format_exception(raised.value))
    with pytest.raises(InvalidInput, match="no study 'missing' in postgresql") as raised:
        Sweep.load(engine, "missing", storage)
    assert SECRET not in str(raised.value)


def page_text(at: Any) -> str:
    """Everything an AppTest page holds, as its protobuf text."""

    def texts(node: Any) -> Iterator[str]:
        yield str(getattr(node, "proto", ""))
        for child in getattr(node, "children", {}).values():
            yield from texts(child)

    return "\n".join(texts(at._tree))


def test_the_sweep_page_shows_a_storage_that_fails_as_a_message_without_the_password(
    postgres, role_url, monkeypatch
) -> None:
    """The role may use the lab's tables, not create Optuna's beside them: the page says
    so, in a message, not a traceback, without the password. (One of Optuna's tables is
    there: without one, a store holds no sweep, and the page opens no storage.)"""
    Store(role_url).close()  # the lab's tables, the role's own
    role = urlsplit(role_url).username
    with psycopg.connect(postgres.url(), autocommit=True) as conn:
        conn.execute(f"ALTER SCHEMA {role} OWNER TO postgres")
        conn.execute(f"GRANT USAGE ON SCHEMA {role} TO {role}")
        conn.execute(f"CREATE TABLE {role}.studies (study_id INTEGER)")
    with app_serving(role_url, monkeypatch):
        at = page(nav.SWEEP).run()
    assert not at.exception
    (error,) = [e.value for e in at.error if "sweeps cannot be read" in e.value]
    assert "permission denied for schema" in error and "\\*\\*\\*" in error
    assert SECRET not in page_text(at)


def test_tracebacks_stay_off_the_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """An error the pages do not catch shows its type, as Streamlit's own config parser
    reads `.streamlit/config.toml`; its message and traceback stay in the server's log."""
    from streamlit import config

    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    try:
        config.get_config_options(force_reparse=True)
        assert config.get_option("client.showErrorDetails") == "type"
        assert config.get_where_defined("client.showErrorDetails").endswith("config.toml")
    finally:
        config.get_config_options(force_reparse=True)
