"""Roles on the dashboard's server (`ui.roles`): with a presenter key configured, a session
without it is a viewer, refused every action at the guard with nothing written; it sees
no control; the presenter's key, shown once in the address, is kept and dropped from it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.presenting import KEY_VARIABLE
from core.store import Store
from tests.apptest import page, written_run
from tests.viewer_actions import CONTROLS, PATHS

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
    """What the lab keeps: every row of the store but the processes' heartbeats, and
    every file beside it but the database's own and logs."""
    with sqlite3.connect(store) as db:
        tables = [
            name
            for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if name != "services"
        ]
        rows = [(t, *row) for t in sorted(tables) for row in db.execute(f"SELECT * FROM {t}")]
    files = sorted(
        str(p.relative_to(store.parent))
        for p in store.parent.rglob("*")
        if p.is_file() and not p.name.startswith(store.name) and p.suffix not in {".log", ".lock"}
    )
    return rows, files


def act(path: str, run_id: str, key: str | None = None) -> AppTest:
    """Runs `path` in a session (the presenter's when `key` is the key)."""
    at = AppTest.from_string(SCRIPT, default_timeout=60)
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
    for name in ("app.py", "pages/2_Live.py", "pages/4_Sweep.py", "pages/6_Recipes.py"):
        at = page(name)
        if name == "pages/2_Live.py":
            at.query_params["runs"] = room[1]
        at.run()
        assert not at.exception, name
        assert not buttons(at) & CONTROLS, (name, buttons(at) & CONTROLS)
        assert not at.get("file_uploader") and not at.select_slider, name
    at = page("app.py").run()
    assert "Live" in sidebar_links(at) and "Train" not in sidebar_links(at)
    assert not any("Share with the room" in e.label for e in at.expander)
    train = page("pages/1_Train.py").run()
    assert any("Train is the presenter's" in info.value for info in train.info)
    assert not train.button and not train.get("file_uploader")


def test_the_presenters_key_is_kept_and_dropped_from_the_address(room) -> None:
    at = page("app.py")
    at.query_params["key"] = KEY
    at.run()
    assert "key" not in at.query_params
    assert {"Start the demo race", "Delete", "Add tags"} <= buttons(at)
    assert "Train" in sidebar_links(at)
    assert any("Share with the room" in e.label for e in at.expander)
    at.switch_page("pages/2_Live.py")
    at.query_params["runs"] = room[1]
    at.run()  # another page, the address without the key: still the presenter
    assert "Clone" in buttons(at)
    assert not any(KEY in markdown.value for markdown in at.markdown)


def test_a_wrong_key_leaves_a_viewer_with_a_message(room) -> None:
    at = page("app.py")
    at.query_params["key"] = "not-the-key"
    at.run()
    assert "key" not in at.query_params
    assert any("not the presenter's key" in warning.value for warning in at.warning)
    assert not buttons(at) & CONTROLS


def test_without_a_key_every_session_presents(app_store) -> None:
    at = page("app.py").run()
    assert "Start the demo race" in buttons(at)
    assert not any("Share with the room" in e.label for e in at.expander)
