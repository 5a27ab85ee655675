"""Live's charts are drawn once a refresh for every session (issue 38, item 4): the
bounded store of drawings (`ui.shared_figures`), and the Live page using it under AppTest,
each `AppTest` a session of its own in this one process, as a page server's sessions are.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from core.engine.client import EngineClient
from core.store.metrics import Block
from tests.apptest import live_specs, page, written_run
from tests.waiting import scaled
from ui import nav, shared_figures


@pytest.fixture(autouse=True)
def no_drawings() -> Iterator[None]:
    shared_figures.forget()
    yield
    shared_figures.forget()


def test_a_drawing_is_made_once_and_shared() -> None:
    made: list[str] = []

    def draw() -> dict[str, str]:
        made.append("a")
        return {"loss": "{}"}

    first = shared_figures.shared("view", 1, draw)
    assert shared_figures.shared("view", 1, draw) is first
    assert shared_figures.shared("view", 2, draw) is first  # a step later, but fresh
    assert made == ["a"]
    shared_figures.shared("view", 2, draw, fresh_for=0)  # a step later, and not fresh
    assert made == ["a", "a"]
    shared_figures.shared("another view", 2, draw)
    assert made == ["a", "a", "a"]


def test_sessions_asking_while_it_is_drawn_wait_for_that_drawing() -> None:
    started, finish = threading.Event(), threading.Event()
    made: list[int] = []

    def draw() -> dict[str, str]:
        made.append(1)
        started.set()
        finish.wait(scaled(30))
        return {"loss": "{}"}

    results: list[dict[str, str]] = []
    drawer = threading.Thread(target=lambda: results.append(shared_figures.shared("k", 0, draw)))
    drawer.start()
    assert started.wait(scaled(30))
    others = [
        threading.Thread(target=lambda: results.append(shared_figures.shared("k", 0, draw)))
        for _ in range(7)
    ]
    for thread in others:
        thread.start()
    finish.set()
    for thread in [drawer, *others]:
        thread.join(scaled(30))
    assert made == [1] and len(results) == 8
    assert all(result is results[0] for result in results)


def test_the_drawings_kept_are_bounded_and_the_oldest_goes_first() -> None:
    made: list[int] = []

    def draw(i: int) -> Any:
        return lambda: made.append(i) or {"k": str(i)}

    for i in range(shared_figures.LIMIT + 5):
        shared_figures.shared(i, 0, draw(i))
    shared_figures.shared(shared_figures.LIMIT + 4, 0, draw(-1))  # the newest: kept
    assert -1 not in made
    shared_figures.shared(0, 0, draw(-2))  # the oldest: gone, drawn again
    assert made[-1] == -2


def test_a_drawing_that_failed_is_tried_again() -> None:
    def fail() -> dict[str, str]:
        raise RuntimeError("the store was busy")

    with pytest.raises(RuntimeError, match="busy"):
        shared_figures.shared("k", 0, fail)
    assert shared_figures.shared("k", 0, lambda: {"loss": "{}"}) == {"loss": "{}"}


def test_live_sessions_share_a_refresh_until_a_new_step_is_logged_and_it_ages(
    lab: EngineClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    import core.charts

    built: list[int] = []
    real = core.charts.training_figures
    monkeypatch.setattr(
        core.charts, "training_figures", lambda shown: built.append(1) or real(shown)
    )
    run_id = written_run(lab.store, "shared", "shared run")

    def session() -> list[str]:
        at = page(nav.LIVE)
        at.session_state["watch"] = [run_id]
        at.run()
        assert not at.exception
        return live_specs(at)

    # Three sessions' runs of the page can take longer than FRESH_SECONDS on a busy
    # machine; the window is what is tested, not how fast AppTest runs.
    monkeypatch.setattr(shared_figures, "FRESH_SECONDS", 3600.0)
    first = session()
    assert session() == first and len(built) == 1  # a second session: the same drawing
    lab.store.append_metrics(run_id, Block(("loss",), np.array([40]), np.array([[0.1]])))
    assert session() == first and len(built) == 1  # a step later, within FRESH_SECONDS
    monkeypatch.setattr(shared_figures, "FRESH_SECONDS", 0.0)
    after = session()
    assert len(built) == 2 and after != first  # a new step logged: drawn again
