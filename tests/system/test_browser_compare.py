"""Compare in Chromium at 1400×1000, on runs written into the store beforehand (no
training): "Is A better than B?" is answered in the first screen, and the parallel
coordinates' first axis shows `projected_gd` whole."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from core.store import Store
from tests import app_server
from tests.apptest import written_group
from tests.browser import NEEDS_CHROMIUM, screenshot, settle
from tests.waiting import scaled
from ui import nav

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]

SCREEN = {"width": 1400, "height": 1000}
PROJECTED = {"optimizer": "projected_gd", "hyperparameters": {"learning_rate": 0.1, "radius": 5.0}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The app on a store of two groups of three runs: sgd, then projected_gd (the newer)."""
    folder = tmp_path_factory.mktemp("compare")
    store = folder / "lab.sqlite"
    with Store(store) as opened:
        written_group(opened, "sgd", (0.60, 0.62, 0.58))
        written_group(opened, "projected", (0.30, 0.31, 0.29), **PROJECTED)
    process, port = app_server.start(store, folder / "streamlit.log")
    yield f"http://127.0.0.1:{port}"
    app_server.stop(process, store)


def box(page: object, selector: str) -> dict[str, float]:
    """The bounding box, in the window's pixels, of the first element `selector` finds
    once it is attached (drawn or not)."""
    element = page.wait_for_selector(selector, state="attached", timeout=scaled(60_000))
    return element.bounding_box()


def test_the_verdict_is_in_the_first_screen_and_no_axis_label_is_cut(
    server: str, browser: object, tmp_path: Path
) -> None:
    page = browser.new_page(viewport=SCREEN)
    page.goto(f"{server}{nav.COMPARE.url}")
    settle(page)
    sentence = box(page, "text=over 3 and 3 seeds")
    assert sentence["y"] >= 0 and sentence["y"] + sentence["height"] <= SCREEN["height"]
    note = box(page, "text=it can give no p below 0.1")
    assert note["y"] + note["height"] <= SCREEN["height"]  # the p-values explained, too
    tick = box(page, ".parcoords .tick text >> text=projected_gd")
    chart = box(page, ".js-plotly-plot:has(.parcoords)")
    assert tick["x"] >= chart["x"], (tick, chart)  # whole, not cut at the chart's edge
    screenshot(page, "compare-groups")
    assert page.locator("[data-testid='stException']").count() == 0
