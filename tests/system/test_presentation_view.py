"""Live's presentation view in Chromium at a projector's 1024×768 (issue 39, item 4), on a
server of its own whose first visitor opens the view's address straight away (a bookmark):
the charts in the first screen, two a row, in large type, no legend over an axis title
and no title over the plot,
the run cards a line each; then three a row, and the switch that writes the address.
Screenshots go to `test-artifacts/presentation-*.png`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser import ARTIFACTS, NEEDS_CHROMIUM, repainted, settle, wait_for_drawn_charts
from tests.waiting import scaled
from ui import nav

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]

PROJECTOR = {"width": 1024, "height": 768}
RUNS = (
    {"optimizer": "adamw", "name": "adamw on digits"},
    {"optimizer": "sgd", "name": "sgd with a clip", "hyperparameters": {"clip_norm": 0.5}},
)
# Each chart's boxes (left, top, right, bottom, in px), and the computed size of its ticks.
# The view's legend, a figure of its own, is none of them (ui/live_chart.js marks it).
CHARTS = ".js-plotly-plot:not(.optlab-legend)"
BOXES = f"""() => [...document.querySelectorAll('{CHARTS}')].map(p => {{
    const box = selector => {{
        const found = p.querySelector(selector);
        if (!found) return null;
        const r = found.getBoundingClientRect();
        return [r.left, r.top, r.right, r.bottom];
    }};
    const tick = p.querySelector('.xtick text');
    return {{
        key: p.layout.uirevision, chart: box('.main-svg'), plot: box('.nsewdrag'),
        legend: box('.legend'),
        xtitle: box('.xtitle'), ytitle: box('.ytitle'), title: box('.gtitle'),
        tick: tick ? parseFloat(getComputedStyle(tick).fontSize) : null,
    }};
}})"""


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[str, list[str], Any]]:
    """A fresh server no page has been asked of yet (with its engine and Chromium), and
    two short runs."""
    from bench.watching import lab_with_a_browser

    with lab_with_a_browser() as (client, url, browser, _):
        base = {"model": "mlp", "dataset": "digits", "epochs": 2}
        ids = [client.start({**base, **run}) for run in RUNS]
        for run_id in ids:
            assert client.wait(run_id, scaled(120)).status == "completed"
        yield url, ids, browser


def measured(page: Any, per_row: int) -> list[dict[str, Any]]:
    """The charts' boxes, once every chart on the page is laid out and the first row
    holds `per_row` of them (a redraw replaces the charts one by one, and a busy browser
    lays out the new ones over a few frames); fails if that does not happen in 60 s."""
    page.wait_for_function(
        """([perRow, charts]) => {
            const svgs = [...document.querySelectorAll(charts)]
                .map(plot => plot.querySelector('.main-svg')).filter(svg => svg);
            const tops = svgs.map(svg => Math.round(svg.getBoundingClientRect().top));
            return svgs.every(svg => svg.getBoundingClientRect().width > 0)
                && tops.filter(top => top === Math.min(...tops)).length === perRow;
        }""",
        arg=[per_row, CHARTS],
        timeout=scaled(60_000),
    )
    return page.evaluate(BOXES)


def overlap(a: list[float] | None, b: list[float] | None) -> bool:
    """Whether two boxes share any area (touching edges do not)."""
    if a is None or b is None:
        return False
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    repainted(page)
    page.screenshot(path=str(ARTIFACTS / f"presentation-{name}.png"))


def assert_legible(charts: list[dict[str, Any]], per_row: int, filled: int | None = None) -> None:
    """The charts fill rows of `per_row` across the page (`filled` of them a row where a
    row holds one metric of fewer runs), with projector type and no legend over an axis
    title or the title."""
    filled = filled or per_row
    tops = sorted({round(chart["chart"][1]) for chart in charts})
    assert len(tops) == -(-len(charts) // filled), tops  # full rows, each level
    assert len([chart for chart in charts if round(chart["chart"][1]) == tops[0]]) == filled
    for chart in charts:
        left, _, right, _ = chart["chart"]
        assert right - left >= (880 / per_row) * 0.85, chart  # the page's width, shared
        assert chart["tick"] is None or chart["tick"] >= 14, chart
        for part in ("xtitle", "ytitle", "title"):
            assert not overlap(chart["legend"], chart[part]), (chart["key"], part, chart)
        # A long title wraps, whole, between the chart's top and the plot.
        assert chart["chart"][1] <= chart["title"][1] < chart["title"][3] <= chart["plot"][1], chart


def test_the_presentation_view_fits_a_projector(lab) -> None:
    url, ids, browser = lab
    page = browser.new_page(viewport=PROJECTOR)
    # The first address this server is asked for: the view's, as a bookmark opens it.
    page.goto(f"{url}{nav.LIVE.url}?runs={','.join(ids)}&view=presentation")
    wait_for_drawn_charts(page, 5, what="the presentation view")
    settle(page)
    assert page.title() == "Live · Optimizer Lab"  # framed by app.py from the first visit
    sidebar = page.evaluate(
        "() => document.querySelector(\"[data-testid='stSidebar']\").getBoundingClientRect()"
    )
    assert sidebar["right"] <= 1, sidebar  # folded away, off the page
    charts = measured(page, 2)
    first = min(charts, key=lambda chart: chart["chart"][1])
    assert first["chart"][3] <= PROJECTOR["height"], first  # the first screen shows it whole
    assert_legible(charts, per_row=2)
    # One legend above the charts names both runs; the run cards, a line each, come
    # after the charts; no knob panel, no buttons.
    legend = page.locator(".optlab-legend")
    assert legend.count() == 1 and legend.bounding_box()["y"] < first["chart"][1]
    entries = {text.strip("\u200b") for text in legend.locator(".legendtext").all_text_contents()}
    assert {run["name"] for run in RUNS} <= entries, entries
    card = page.locator("[data-testid='stMarkdownContainer']", has_text="sgd with a clip")
    assert card.count() == 1 and card.bounding_box()["y"] > first["chart"][3]
    assert page.get_by_text("Change knobs while it trains").count() == 0
    assert page.get_by_role("button", name="Fork").count() == 0
    shot(page, "two-a-row")

    page.get_by_role("radio", name="3", exact=True).click()
    page.wait_for_function(
        "(charts) => { const c = [...document.querySelectorAll(charts)];"
        " return c.length === 5 && c[2].getBoundingClientRect().top"
        " === c[0].getBoundingClientRect().top; }",
        arg=CHARTS,
        timeout=scaled(60_000),
    )
    settle(page)
    assert_legible(measured(page, 3), per_row=3)
    shot(page, "three-a-row")

    page.get_by_text("Per layer", exact=True).click()
    wait_for_drawn_charts(page, 6, what="per layer, presented")  # 3 a run
    # A row a metric, its two runs side by side, each a third of the page.
    assert_legible(measured(page, 2), per_row=3, filled=2)
    shot(page, "per-layer")
    page.close()


def test_the_switch_keeps_the_view_in_the_address(lab) -> None:
    url, ids, browser = lab
    page = browser.new_page(viewport=PROJECTOR)
    page.goto(f"{url}{nav.LIVE.url}?runs={ids[0]}")
    wait_for_drawn_charts(page, 5, what="Live")
    assert page.get_by_role("button", name="Fork").count() == 1  # the full card
    page.get_by_text("Presentation view", exact=True).click()
    page.wait_for_url("**view=presentation**", timeout=scaled(60_000))
    page.wait_for_function(
        "() => !document.body.innerText.includes('Fork')", timeout=scaled(60_000)
    )
    page.reload()
    wait_for_drawn_charts(page, 5, what="the presentation view, reloaded")
    assert page.get_by_role("switch", name="Presentation view").is_checked()
    page.get_by_text("Presentation view", exact=True).click()
    page.wait_for_function("() => !location.search.includes('view=')", timeout=scaled(60_000))
    page.get_by_role("button", name="Fork").wait_for(timeout=scaled(60_000))
    page.close()


def test_homes_race_controls_and_links_fit_a_projector(lab) -> None:
    """At 1024×768 with the sidebar open, the race's lengths and Home's links show whole
    (three columns cut "3 minutes" to "3" and a link to "Reproduce a classic finc")."""
    url, _, browser = lab
    page = browser.new_page(viewport=PROJECTOR)
    page.goto(url)
    page.get_by_role("button", name="Start the demo race").wait_for(timeout=scaled(60_000))
    cut = page.evaluate(
        """() => [...document.querySelectorAll('[data-testid=stMain]')[0]
                .querySelectorAll('[role=radio], [data-testid=stPageLink] a')]
            .filter(e => {
                const column = e.closest('[data-testid=stColumn], [data-testid=stMain]')
                    .getBoundingClientRect();
                const box = e.getBoundingClientRect();
                const text = e.querySelector('p, span') || e;
                return box.right > column.right + 1 || text.scrollWidth > text.clientWidth + 1;
            })
            .map(e => e.innerText)"""
    )
    assert cut == []
    shot(page, "home")
    page.close()
