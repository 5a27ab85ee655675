"""End to end in Chromium: a sweep started on the Sweep page runs on while the dashboard
restarts (the engine process drives it), and the restarted page shows it live and stops it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from core.store import Store
from tests import app_server
from tests.browser import NEEDS_CHROMIUM, repainted, settle, start_sweep
from tests.waiting import wait_for
from ui import nav

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]

SCREENSHOTS = app_server.ROOT / "docs" / "screenshots"
TRAINING = re.compile(r"\b[1-9]\d* training")  # the progress line's count of trials training
# A run's step in the sidebar's "Training now", as `texts.steps` writes it: "· 1,234/22,000"
# (once a trial passed step 999 the comma failed a pattern without it).
STEPPED = re.compile(r"· [1-9][\d,]*/")


def trial_steps(store_path: Path) -> dict[str, int]:
    """The step of each run of the sweep's trials, by run id."""
    with Store(store_path) as store:
        return {r.id: r.step for r in store.list_runs() if r.name.startswith("sweep ")}


def progress_text(page: Any) -> str:
    progress = page.locator("[data-testid='stProgress']")
    return progress.first.inner_text() if progress.count() else ""


def test_a_sweep_survives_a_dashboard_restart_and_is_stopped_from_the_page(
    tmp_path, browser
) -> None:
    store_path = tmp_path / "lab.sqlite"
    process, port = app_server.start(store_path, tmp_path / "first.log")
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(f"http://127.0.0.1:{port}{nav.SWEEP.url}")
        settle(page)
        start_sweep(page, epochs=1000, trials=2)  # trials that train until stopped
        wait_for(lambda: TRAINING.search(progress_text(page)), 180, "its trials to train")
        engine = app_server.serving_engine(store_path)
        page.close()
        app_server.end(process)  # `make run` stopped: the engine it launched serves on

        process, port = app_server.start(store_path, tmp_path / "second.log")
        assert app_server.serving_engine(store_path) == engine
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(f"http://127.0.0.1:{port}{nav.SWEEP.url}")
        settle(page)
        wait_for(lambda: progress_text(page).startswith("running"), 60, "the sweep, running")
        wait_for(lambda: any(trial_steps(store_path).values()), 120, "a trial to train a step")
        wait_for(lambda: TRAINING.search(progress_text(page)), 30, "its trials, training")
        before = trial_steps(store_path)
        sidebar = page.locator("[data-testid='stSidebar']")
        # The sidebar ticks every 5 s.
        wait_for(lambda: STEPPED.search(sidebar.inner_text()), 60, "the trials' steps, live")
        repainted(page)
        SCREENSHOTS.mkdir(exist_ok=True)  # for the closing note, at 1280×800
        page.screenshot(path=str(SCREENSHOTS / "sweep-after-a-dashboard-restart.png"))

        page.get_by_role("button", name="Stop the sweep").click()
        wait_for(lambda: progress_text(page).startswith("stopped"), 90, "the sweep, stopped")
        with Store(store_path) as store:
            trials = [r for r in store.list_runs() if r.name.startswith("sweep ")]
        assert {r.status for r in trials} == {"stopped"}
        assert sum(r.step for r in trials) > sum(before.values())  # it trained on meanwhile
        resume = page.get_by_role("button", name="Resume the sweep")
        wait_for(lambda: resume.count() == 1, 30, "Resume, in Stop's place")
        assert page.locator("[data-testid='stException']").count() == 0
    finally:
        app_server.stop(process, store_path)
