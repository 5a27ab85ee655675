"""The Sweep page's analysis views in Chromium: each drawn for a stored study (and shot,
into `test-artifacts/sweep-*.png`), and redrawn in place while the page drives a sweep."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.store import Store
from tests import app_server
from tests.browser import ARTIFACTS, NEEDS_CHROMIUM, repainted, settle, wait_for_drawn_charts
from tests.sweep_studies import stored_study
from tests.waiting import scaled
from ui import nav

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]
VIEW = {"width": 1280, "height": 800}
# Each view's chart by its `uirevision` (core.charts.sweep_analysis), and its shot's name.
VIEWS = {
    "sweep/history": "history",
    "sweep/importance": "importance",
    "sweep/curves": "learning-curves",
    "sweep/edf": "edf",
    "sweep/contour/learning_rate/clip_norm": "contour",
    "sweep/slice/learning_rate": "slice-learning-rate",
    "sweep/slice/batch_size": "slice-batch-size",
}
# (a chart's trace `name`'s points, or -1 without the chart), by the chart's uirevision.
POINTS = """([key, name]) => {
    const chart = [...document.querySelectorAll('.js-plotly-plot')]
        .find(p => p.layout && p.layout.uirevision === key);
    if (!chart) return -1;
    const trace = (chart.data || []).find(t => t.name === name);
    return trace ? trace.x.length : 0;
}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The app on a store holding a finished sweep of 16 trials, "stored"."""
    folder = tmp_path_factory.mktemp("sweep-analysis")
    store = folder / "lab.sqlite"
    with Store(store) as opened:
        stored_study(opened, "stored")
    process, port = app_server.start(store, folder / "streamlit.log")
    yield f"http://127.0.0.1:{port}", store
    app_server.stop(process, store)


def chart_box(page: Any, key: str) -> dict[str, float]:
    """Where the chart `key` is on the page, scrolled into view."""
    handle = page.evaluate_handle(
        "key => [...document.querySelectorAll('.js-plotly-plot')]"
        ".find(p => p.layout && p.layout.uirevision === key)",
        key,
    )
    element = handle.as_element()
    assert element is not None, key
    element.scroll_into_view_if_needed()
    repainted(page)
    box = element.bounding_box()
    assert box is not None, key
    return box


def test_each_view_of_a_stored_study_is_drawn(server: tuple[str, Path], browser: Any) -> None:
    url, _ = server
    page = browser.new_page(viewport=VIEW)
    page.goto(f"{url}{nav.SWEEP.url}")
    settle(page)
    # The parallel coordinates, then the 7 views: a contour and 3 slices among them.
    wait_for_drawn_charts(page, 1 + 4 + 1 + 3, "the sweep's analysis")
    assert page.evaluate(POINTS, ["sweep/history", "trial"]) > 0
    assert page.evaluate(POINTS, ["sweep/curves", "pruned here"]) > 0
    ARTIFACTS.mkdir(exist_ok=True)
    for key, name in VIEWS.items():
        box = chart_box(page, key)
        if name == "contour":  # with its knobs' pickers above it
            picker = page.get_by_text("contour: x", exact=True).bounding_box()
            assert picker is not None
            box = {
                **box,
                "y": picker["y"] - 8,
                "height": box["y"] + box["height"] - picker["y"] + 8,
            }
        page.screenshot(path=str(ARTIFACTS / f"sweep-{name}.png"), clip=box)
    summary = page.locator("[data-testid='stMarkdown']").filter(has_text="Knobs that matter")
    summary.scroll_into_view_if_needed()
    assert "Widen learning_rate" in summary.inner_text()
    summary.screenshot(path=str(ARTIFACTS / "sweep-summary.png"))
    assert page.locator("[data-testid='stException']").count() == 0


def test_the_views_are_redrawn_in_place_while_the_page_drives_a_sweep(
    server: tuple[str, Path], browser: Any
) -> None:
    url, store = server
    with Store(store) as opened:  # the newest study: the page shows it
        stored_study(opened, "resumed", n_trials=6, seed=1, written=2, pruning=False)
    page = browser.new_page(viewport=VIEW)
    page.goto(f"{url}{nav.SWEEP.url}")
    settle(page)
    page.wait_for_function(
        f"() => ({POINTS})(['sweep/history', 'trial']) === 2", timeout=scaled(60_000)
    )
    importance = ["sweep/importance", "fANOVA"]
    page.wait_for_function(f"() => ({POINTS})({importance}) >= 0", timeout=scaled(60_000))  # drawn
    assert page.evaluate(POINTS, importance) == 0  # 2 trials: no importance yet
    page.evaluate("() => { window.notReloaded = true; }")
    page.get_by_role("button", name="Resume the sweep").click()
    # Its 4 trials train in the app's engine; the views tick along, with no reload.
    page.wait_for_function(
        f"() => ({POINTS})(['sweep/history', 'trial']) >= 4"
        f" && ({POINTS})(['sweep/importance', 'fANOVA']) === 3",
        timeout=scaled(300_000),
    )
    assert page.evaluate("() => window.notReloaded === true")
    assert page.locator("[data-testid='stException']").count() == 0
