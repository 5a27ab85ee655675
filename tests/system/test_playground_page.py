"""The Playground in Chromium (issue 54): against `python -m ui.serve run app.py`, a knob
moved on the page redraws its racer's path in place, and ▶ Play cuts every path at the
step it plays, in the browser, without a rerun."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import app_server
from tests.browser import NEEDS_CHROMIUM, chromium, settle
from tests.waiting import scaled
from ui import nav

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]

# The x of each racer's path, by its label, as Plotly drew it.
PATHS = """() => { const chart = document.querySelector('.js-plotly-plot');
    if (!chart || !chart._fullData) return null;
    return Object.fromEntries(chart._fullData
        .filter(t => t.meta === 'animated' && !t.name.includes(':'))
        .map(t => [t.name, Array.from(t.x)])); }"""


def test_a_knob_moved_redraws_its_path_and_play_races_them(tmp_path: Path) -> None:
    store = tmp_path / "lab.sqlite"
    process, port = app_server.start(store, tmp_path / "streamlit.log")
    try:
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1024, "height": 768})
            page.goto(f"http://127.0.0.1:{port}{nav.PLAYGROUND.url}")
            # The first paths wait for the worker to load TensorFlow.
            page.wait_for_function(
                f"() => {{ const p = ({PATHS})(); return p && Object.keys(p).length === 3; }}",
                timeout=scaled(120_000),
            )
            settle(page)
            before = page.evaluate(PATHS)
            assert list(before) == ["sgd", "momentum", "adam"]
            steps = len(before["sgd"]) - 1

            rate = page.get_by_label("learning_rate", exact=True).first  # sgd's
            rate.fill("0.002")
            rate.press("Enter")
            page.wait_for_function(
                f"(old) => {{ const p = ({PATHS})(); return p && p.sgd.length > 1"
                " && p.sgd.some((x, i) => x !== old[i]); }",
                arg=before["sgd"],
                timeout=scaled(60_000),
            )
            after = page.evaluate(PATHS)
            assert after["momentum"] == before["momentum"]  # its knobs did not move

            page.locator(".updatemenu-button").first.click()  # ▶ Play, from step 0
            page.wait_for_function(
                f"(n) => {{ const p = ({PATHS})(); return p && p.sgd.length < n; }}",
                arg=steps + 1,
                timeout=scaled(30_000),
            )
            page.wait_for_function(  # and on to the last step
                f"(n) => {{ const p = ({PATHS})(); return p && p.sgd.length === n; }}",
                arg=steps + 1,
                timeout=scaled(60_000),
            )
    finally:
        app_server.stop(process, store)
