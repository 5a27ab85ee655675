"""Chromium for the end-to-end tests: launching it, waiting for a page, screenshots."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests import app_server
from tests.waiting import overdue, scaled
from ui import nav

ARTIFACTS = app_server.ROOT / "test-artifacts"
NEEDS_CHROMIUM = pytest.mark.skipif(
    not app_server.CHROMIUM.exists(),
    reason="no browser at /usr/bin/chromium: install Debian's with "
    "`apt-get install chromium` (as .ci/run does) to run the end-to-end tests",
)

KNOB_PANEL = "Change knobs while it trains"  # Live's expander of a run's knobs


@contextmanager
def chromium() -> Iterator[Any]:
    """Debian's Chromium, headless, through Playwright, whose own deadlines (30 s for an
    action or a navigation, 5 s for `expect`) are scaled by the machine's slowness, as
    the tests' are; a test's explicit `timeout=` goes through `tests.waiting.scaled`."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(app_server.CHROMIUM), args=list(app_server.CHROMIUM_ARGS)
        )
        # Each new page comes in a context of its own, which takes these defaults.
        browser.on("context", lambda context: context.set_default_timeout(scaled(30_000)))
        expect.set_options(timeout=scaled(5_000))
        try:
            yield browser
        finally:
            browser.close()


def settle(page: Any, timeout: float = 60_000) -> None:
    """Waits until the app has finished running its script, up to `timeout` nominal ms."""
    page.wait_for_selector(
        "[data-testid='stApp'][data-test-script-state='notRunning']", timeout=scaled(timeout)
    )


def buttons(page: Any) -> set[str]:
    """The buttons' labels; each line of a button's text (its icon's name is one)."""
    texts = page.locator("button").all_inner_texts()
    return {line.strip() for text in texts for line in text.splitlines() if line.strip()}


def start_sweep(page: Any, epochs: int, trials: int) -> None:
    """On the Sweep page: a random sweep of `trials` trials of mlp on digits, `epochs`
    epochs each, started from the form."""
    for name, option in (("model", "mlp"), ("dataset", "digits")):
        page.locator("[data-testid='stSelectbox']").filter(has_text=name).first.click()
        page.get_by_role("option", name=option, exact=True).click()
        settle(page)
    for label, value in (
        ("epochs", str(epochs)),
        ("trials (empty for a grid: every point)", str(trials)),
    ):
        field = page.get_by_label(label, exact=True)
        field.fill(value)
        field.press("Enter")
        settle(page)
    page.get_by_text("random", exact=True).click()
    settle(page)
    page.get_by_role("button", name="Start sweep").click()


def repainted(page: Any) -> None:
    """Waits until the browser has painted twice: a layout change (a resized window) is
    on screen."""
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def screenshot(page: Any, name: str, height: int = 1000) -> None:
    """Saves the page; Streamlit scrolls inside its own container, so a tall page needs a
    tall window rather than `full_page`."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.set_viewport_size({"width": 1400, "height": height})
    repainted(page)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))
    page.set_viewport_size({"width": 1400, "height": 1000})


# (charts on the page, charts that draw at least one point); a view's one legend, a figure
# that ui/live_chart.js marks, is no chart.
_CHARTS_WITH_DATA = """() => {
    const plots = [...document.querySelectorAll('.js-plotly-plot:not(.optlab-legend)')];
    const drawn = plots.filter(p => (p._fullData || []).some(
        t => (t.x && t.x.length) || (t.z && t.z.length)
             || (t.dimensions && t.dimensions.length)));
    return [plots.length, drawn.length];
}"""


def charts_with_data(page: Any) -> tuple[int, int]:
    """(charts on the page, charts that draw at least one point)."""
    return page.evaluate(_CHARTS_WITH_DATA)


def wait_for_drawn_charts(page: Any, count: int, what: str, timeout: float = 60_000) -> None:
    """Waits until the page holds `count` charts and each draws at least one point; fails
    saying how many were drawn, naming `what`, when `timeout` nominal ms pass first."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(
            f"() => {{ const [all, drawn] = ({_CHARTS_WITH_DATA})(); "
            f"return all === {count} && drawn === all; }}",
            timeout=scaled(timeout),
        )
    except PlaywrightTimeout:
        total, drawn = charts_with_data(page)
        drawn_of = f"{drawn} of {total} charts drawn, {count} expected"
        pytest.fail(f"{overdue(what, timeout / 1000)}: {drawn_of}")


def open_live(browser: Any, url: str, run_ids: list[str]) -> Any:
    """A new tab on the Live page of `run_ids`, once its charts are drawn."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{url}{nav.LIVE.url}?runs={','.join(run_ids)}")
    # Attached, not visible: on a slow machine a chart is redrawn by each refresh.
    page.wait_for_selector(".js-plotly-plot", state="attached", timeout=scaled(60_000))
    return page


def record(line: str) -> None:
    """Prints what a watching test measured and adds it to `test-artifacts/watching.txt`."""
    print("\n" + line)
    ARTIFACTS.mkdir(exist_ok=True)
    with (ARTIFACTS / "watching.txt").open("a") as file:
        file.write(line + "\n")


def knob_panel_opened(panel: Any) -> bool:
    """Clicks the knob panel open unless it is, and says whether its sliders show within
    15 s. A page drawn anew meanwhile can show the panel closed again (a CI run waited
    120 s on one that stayed closed): the next call clicks it again."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    if not panel.locator("details").evaluate("d => d.open"):
        panel.get_by_text(KNOB_PANEL).click(timeout=scaled(120_000))
    try:
        panel.get_by_role("slider").first.wait_for(state="visible", timeout=scaled(15_000))
    except PlaywrightTimeoutError:
        return False
    return True
