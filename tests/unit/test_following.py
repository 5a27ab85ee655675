"""The presenter's view through the store (`core.engine.following`, issue 38 item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.engine.following import ROLE, PresenterView, latest, publish
from core.store import Store
from core.store.owner import LIVENESS_SECONDS
from tests import planted


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "lab.sqlite")


def test_a_published_view_is_read_back_and_replaced_by_the_next(store: Store) -> None:
    assert latest(store) is None
    publish(store, PresenterView("Live", ("a", "b"), "Training"))
    assert latest(store) == PresenterView("Live", ("a", "b"), "Training")
    publish(store, PresenterView("Live", ("c",), "Per layer"))
    assert latest(store) == PresenterView("Live", ("c",), "Per layer")


def test_a_silent_presenter_is_not_followed(store: Store) -> None:
    publish(store, PresenterView("Live", ("a",)))
    planted.write(
        store.location, "UPDATE services SET heartbeat = heartbeat - ?", (LIVENESS_SECONDS + 1,)
    )
    assert latest(store) is None


def test_the_freshest_of_two_presenters_is_followed_and_a_row_without_a_view_skipped(
    store: Store,
) -> None:
    store.heartbeat("other-host:1:1:presenter", ROLE, {"page": "Live", "runs": ["old"]})
    planted.write(store.location, "UPDATE services SET heartbeat = heartbeat - 5")
    publish(store, PresenterView("Live", ("new",)))
    assert latest(store) == PresenterView("Live", ("new",))
    store.heartbeat("other-host:2:2:presenter", ROLE, {"nothing": "here"})
    assert latest(store) == PresenterView("Live", ("new",))


def test_a_pages_own_state_is_published_with_its_view(store: Store) -> None:
    view = PresenterView("Playground", (), None, '{"playground:surface": "beale"}')
    publish(store, view)
    assert latest(store) == view
    # A state that is no text is none; a row of old, without one, reads as before.
    assert PresenterView.from_info({"page": "Live", "runs": [], "state": 7}) == PresenterView(
        "Live"
    )
    assert PresenterView.from_info({"page": "Live", "runs": ["a"]}) == PresenterView("Live", ("a",))
