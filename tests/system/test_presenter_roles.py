"""Roles on the dashboard's server (`ui.roles`): with a presenter key configured, a session
without it is a viewer, refused every action at the guard with nothing written; it sees
no control; the presenter's key, shown once in the address, is kept and dropped from it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.escaping import escape_markdown
from core.guesses import LIMIT, Guesses
from core.presenter import KEY_VARIABLE
from core.store import Store
from core.sweep.hosting import SweepHost
from tests.apptest import framed, page, written_run
from tests.sweep_studies import abandoned_trial
from tests.viewer_actions import CONTROLS, PATHS, page_loads
from tests.waiting import scaled
from ui import nav, roles

KEY = "the-presenters-key-0123456789"
# Calls a path of tests/viewer_actions.py in the session, as its page would.
SCRIPT = """
import streamlit as st
from tests.viewer_actions import PATHS
from ui import state
try:
    PATHS[st.session_state["path"]](state.engine(), st.session_state["run_id"])
except PermissionError as exc:
    st.session_state["refused"] = str(exc)
"""


@pytest.fixture
def room(app_store: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """The app presenting to a room (a key configured), with one ended run."""
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    return app_store, written_run(Store(app_store), "ended", "an ended run")


def snapshot(store: Path) -> tuple[list[tuple], list[str]]:
    """What the lab keeps: the store's schema and every row of it but the processes'
    heartbeats (the sweeps' studies, in Optuna's tables, among them), and every file
    beside it but the database's own and logs."""
    with sqlite3.connect(store) as db:
        schema = sorted(db.execute("SELECT type, name, sql FROM sqlite_master"))
        tables = [name for kind, name, _ in schema if kind == "table" and name != "services"]
        rows = schema + [
            (t, *row) for t in sorted(tables) for row in db.execute(f"SELECT * FROM {t}")
        ]
    files = sorted(
        str(p.relative_to(store.parent))
        for p in store.parent.rglob("*")
        if p.is_file() and not p.name.startswith(store.name) and p.suffix not in {".log", ".lock"}
    )
    return rows, files


def act(path: str, run_id: str, key: str | None = None) -> AppTest:
    """Runs `path` in a session (the presenter's when `key` is the key)."""
    at = AppTest.from_string(SCRIPT, default_timeout=scaled(60))
    if key is not None:
        at.session_state["presenter:key"] = key
    at.session_state["path"] = path
    at.session_state["run_id"] = run_id
    return at.run()


@pytest.mark.parametrize("path", sorted(PATHS))
def test_each_action_refuses_a_viewer_at_the_guard_and_writes_nothing(room, path) -> None:
    store, run_id = room
    before = snapshot(store)
    at = act(path, run_id)
    assert not at.exception, at.exception
    assert "Only the presenter can" in at.session_state["refused"], path
    assert snapshot(store) == before, path


@pytest.mark.parametrize("path", ["Home: Tag", "Train: upload"])
def test_the_same_action_writes_for_the_presenter(room, path) -> None:
    store, run_id = room
    before = snapshot(store)
    at = act(path, run_id, key=KEY)
    assert not at.exception and "refused" not in at.session_state
    assert snapshot(store) != before  # the snapshot sees what an action writes


def test_a_wrong_key_is_refused_too(room) -> None:
    _, run_id = room
    at = act("Home: Delete", run_id, key=KEY[:-1] + "x")
    assert "Only the presenter can delete a run" in at.session_state["refused"]


def sidebar_links(at: AppTest) -> list[str]:
    return [node.proto.label for node in at.sidebar if getattr(node, "type", "") == "page_link"]


def buttons(at: AppTest) -> set[str]:
    return {button.label for button in at.button}


def test_a_viewer_sees_no_control_and_no_train(room) -> None:
    for shown in (nav.HOME, nav.LIVE, nav.SWEEP, nav.RECIPES):
        at = page(shown)
        if shown is nav.LIVE:
            at.query_params["runs"] = room[1]
        at.run()
        assert not at.exception, shown.title
        assert not buttons(at) & CONTROLS, (shown.title, buttons(at) & CONTROLS)
        assert not at.get("file_uploader") and not at.select_slider, shown.title
    at = page().run()
    assert "Live" in sidebar_links(at) and "Train" not in sidebar_links(at)
    assert not any("Share with the room" in e.label for e in at.expander)
    train = page(nav.TRAIN).run()
    assert any("Train is the presenter's" in info.value for info in train.info)
    assert not train.button and not train.get("file_uploader")


def test_the_presenters_key_is_kept_and_dropped_from_the_address(room) -> None:
    at = page()
    at.query_params["key"] = KEY
    at.run()
    assert "key" not in at.query_params
    assert {"Start the demo race", "Delete", "Add tags"} <= buttons(at)
    assert "Train" in sidebar_links(at)
    assert any("Share with the room" in e.label for e in at.expander)
    at.switch_page(nav.LIVE.file)
    at.query_params["runs"] = room[1]
    at.run()  # another page, the address without the key: still the presenter
    assert "Clone" in buttons(at)
    assert not any(KEY in markdown.value for markdown in at.markdown)


def test_a_wrong_key_leaves_a_viewer_with_a_message(room) -> None:
    at = page()
    at.query_params["key"] = "not-the-key"
    at.run()
    assert "key" not in at.query_params
    assert any("not the presenter's key" in warning.value for warning in at.warning)
    assert not buttons(at) & CONTROLS


def test_without_a_key_every_session_presents(app_store) -> None:
    at = page().run()
    assert "Start the demo race" in buttons(at)
    assert not any("Share with the room" in e.label for e in at.expander)


def test_the_sixth_wrong_key_of_a_minute_waits_the_right_one_included(room, monkeypatch) -> None:
    """Five wrong keys from this machine in a minute (a clock of the test's): the sixth
    key shown, the right one, is refused unchecked, saying how long to wait; a minute
    after the first wrong one, the right key admits."""
    now = [0.0]
    monkeypatch.setattr(roles, "GUESSES", Guesses("presenter key", clock=lambda: now[0]))

    def shown(key: str) -> AppTest:
        at = page()
        at.query_params["key"] = key
        return at.run()

    for _ in range(LIMIT):
        assert any("not the presenter's key" in w.value for w in shown("not-the-key").warning)
        now[0] += 1
    at = shown(KEY)
    assert [w.value for w in at.warning] == [
        f"Too many wrong keys from this address: try again in {60 - LIMIT} s. This session "
        "watches meanwhile."
    ]
    assert not buttons(at) & CONTROLS and "Train" not in sidebar_links(at)
    now[0] += 60 - LIMIT
    assert "Start the demo race" in buttons(shown(KEY))


@pytest.mark.parametrize("weak", ["a" * 16, "passwordpassword"])
def test_a_dashboard_started_with_a_weak_key_stops_every_page(app_store, monkeypatch, weak) -> None:
    monkeypatch.setenv(KEY_VARIABLE, weak)
    at = page().run()
    (error,) = at.error
    assert error.value.startswith(
        "The lab is misconfigured: "
        + escape_markdown(f"{KEY_VARIABLE}: a key needs at least 16 characters")
    )
    assert weak not in error.value and not buttons(at) & CONTROLS
    assert not roles.may_upload("any session")  # nor does anyone upload


@pytest.mark.parametrize("sweeps", ["no sweep", "an abandoned trial"])
@pytest.mark.parametrize("shown", nav.PAGES, ids=lambda shown: shown.title)
def test_each_page_a_viewer_opens_writes_nothing(room, monkeypatch, shown, sweeps) -> None:
    """A viewer's page load, refreshed once, leaves the store and its sweeps' studies as
    they were: a store without sweeps gets no table of Optuna's, and a trial left
    running is the engine's to settle, never a page's (the engine's settling is held
    off here, so that what changes would be the page's doing)."""
    store, run_id = room
    framed(monkeypatch)
    monkeypatch.setattr(SweepHost, "_settle", lambda *args: None, raising=False)
    if sweeps == "an abandoned trial":
        abandoned_trial(Store(store), "abandoned", run_id)
    before = snapshot(store)
    at = page(shown)
    for key, value in page_loads(run_id)[shown].items():
        at.query_params[key] = value
    at.run().run()
    assert not at.exception, at.exception
    after = snapshot(store)
    assert [row for row in after[0] if row not in before[0]] == [], shown.title  # rows written
    assert after == before, shown.title  # nor any deleted, nor a file
    if shown is nav.HOME:  # the table's download: a viewer's too
        assert [b.proto.label for b in at.get("download_button")] == ["Download as CSV"]
