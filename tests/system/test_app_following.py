"""Following the presenter (issue 38, item 3) under AppTest, each `AppTest` a session of
the one page server: a viewer's Live shows the presenter's runs and group of charts,
until the viewer picks its own; then it may follow again. Outside a room nobody does."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.presenter import KEY_VARIABLE
from core.store import Store
from tests.apptest import page, written_run
from ui import nav

KEY = "the-presenters-key-0123456789"


@pytest.fixture
def runs(app_store: Path) -> list[str]:
    store = Store(app_store)
    return [written_run(store, run_id, f"run {run_id}") for run_id in ("a", "b", "c")]


def live(runs: list[str], key: str | None = None) -> AppTest:
    """A session on Live watching `runs` (the presenter's when `key` is given)."""
    at = page(nav.LIVE)
    if key is not None:
        at.session_state["presenter:key"] = key
    at.session_state["watch"] = runs
    return at.run()


def shown(at: AppTest) -> tuple[list[str], str]:
    return at.multiselect(key="live_runs").value, at.session_state["live_charts"]


def test_a_viewer_follows_the_presenter_until_it_picks_its_own(
    runs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    a, b, c = runs
    presenter = live([a], KEY)
    viewer = live([c])  # its own pick, until the presenter's view reaches it
    assert not viewer.exception and shown(viewer) == ([a], "Training")

    presenter.multiselect(key="live_runs").set_value([a, b]).run()
    presenter.session_state["live_charts"] = "Per layer"
    presenter.run()
    assert shown(viewer.run()) == ([a, b], "Per layer")
    assert not [button for button in viewer.button if button.label == "Follow the presenter"]

    viewer.multiselect(key="live_runs").set_value([c]).run()  # the viewer's own pick
    presenter.multiselect(key="live_runs").set_value([b]).run()
    assert shown(viewer.run())[0] == [c]
    (follow,) = [button for button in viewer.button if button.label == "Follow the presenter"]
    follow.click().run()
    assert shown(viewer) == ([b], "Per layer")


def test_nobody_follows_outside_a_room(runs: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    a, _, c = runs
    first = live([a])
    second = live([c])
    first.multiselect(key="live_runs").set_value([a, c]).run()
    assert shown(second.run())[0] == [c]
    assert not [button for button in second.button if button.label == "Follow the presenter"]


def title(at: AppTest) -> str:
    return at.title[0].value


def test_a_viewer_is_led_from_page_to_page_until_it_opens_one_itself(
    runs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    presenter = page(nav.RECIPES)
    presenter.session_state["presenter:key"] = KEY
    presenter.run()
    viewer = page().run()  # the audience URL: Home, led to the presenter's Recipes
    assert not viewer.exception and "Recipes" in title(viewer)
    presenter.switch_page(nav.TRAIN.file).run()  # the presenter's alone: nobody follows
    assert "Recipes" in title(viewer.run())
    presenter.switch_page(nav.COMPARE.file).run()
    assert "Compare" in title(viewer.run())
    viewer.switch_page(nav.OPTIMIZERS.file).run()  # its own way: following stops
    presenter.switch_page(nav.SWEEP.file).run()
    assert "Optimizers" in title(viewer.run())
    (follow,) = [button for button in viewer.button if button.label == "Follow the presenter"]
    follow.click().run()
    assert "Sweep" in title(viewer)
