"""The Playground in Chromium (issue 54), in a room (`optlab present`): a knob moved on
the presenter's page redraws its racer's path in place; ▶ Play cuts every path at the
step it plays, in the browser, without a rerun, and a following viewer's chart plays it
too; a click on the surface moves the start there, fields and paths."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser import NEEDS_CHROMIUM, chromium, settle
from tests.room import Room, served
from tests.waiting import scaled
from ui import nav

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]

# The x of each racer's path, by its label, as Plotly drew it.
PATHS = """() => { const chart = document.querySelector('.js-plotly-plot');
    if (!chart || !chart._fullData) return null;
    return Object.fromEntries(chart._fullData
        .filter(t => t.meta === 'animated' && !t.name.includes(':'))
        .map(t => [t.name, Array.from(t.x)])); }"""
# The page's pixel at a point (x, y) of the surface's plot.
PIXEL = """([x, y]) => { const chart = document.querySelector('.js-plotly-plot');
    const layout = chart._fullLayout, box = chart.getBoundingClientRect();
    return [box.left + layout.xaxis._offset + layout.xaxis.d2p(x),
            box.top + layout.yaxis._offset + layout.yaxis.d2p(y)]; }"""


@pytest.fixture(scope="module")
def room(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Room, Any]]:
    folder = tmp_path_factory.mktemp("playground")
    with served(folder, folder / "lab.sqlite") as room, chromium() as browser:
        yield room, browser


def drawn(page: Any, racers: int = 3) -> dict[str, list[float]]:
    """Each racer's drawn x, once the chart shows `racers` paths (the first wait for the
    worker to load TensorFlow)."""
    page.wait_for_function(
        f"(n) => {{ const p = ({PATHS})(); return p && Object.keys(p).length === n; }}",
        arg=racers,
        timeout=scaled(120_000),
    )
    settle(page)
    return page.evaluate(PATHS)


def playground(browser: Any, url: str) -> Any:
    """A page of its own (its own cookies) on `url`, at a projector's 1024×768."""
    page = browser.new_context(viewport={"width": 1024, "height": 768}).new_page()
    page.goto(url)
    return page


def presenter_on_the_playground(room: Room, browser: Any) -> Any:
    page = playground(browser, room.presenter)
    page.wait_for_function("() => !window.location.search.includes('key=')")
    page.goto(page.url.split("?")[0].rstrip("/") + nav.PLAYGROUND.url)
    return page


def test_a_knob_moved_redraws_its_path_and_play_races_them_for_the_room(
    room: tuple[Room, Any],
) -> None:
    lab, browser = room
    presenter = presenter_on_the_playground(lab, browser)
    before = drawn(presenter)
    assert list(before) == ["sgd", "momentum", "adam"]
    steps = len(before["sgd"]) - 1
    viewer = playground(browser, lab.audience)  # follows the presenter onto the page
    drawn(viewer)

    rate = presenter.get_by_label("learning_rate", exact=True).first  # sgd's
    rate.fill("0.002")
    rate.press("Enter")
    presenter.wait_for_function(
        f"(old) => {{ const p = ({PATHS})(); return p && p.sgd.length > 1"
        " && p.sgd.some((x, i) => x !== old[i]); }",
        arg=before["sgd"],
        timeout=scaled(60_000),
    )
    after = presenter.evaluate(PATHS)
    assert after["momentum"] == before["momentum"]  # its knobs did not move
    viewer.wait_for_function(  # the viewer's sgd, redrawn as the presenter's
        f"(moved) => {{ const p = ({PATHS})(); return p && p.sgd.every((x, i) => x === moved[i])"
        " && p.sgd.length === moved.length; }",
        arg=after["sgd"],
        timeout=scaled(60_000),
    )

    presenter.locator(".updatemenu-button").first.click()  # ▶ Play, from step 0
    for page in (presenter, viewer):  # the viewer's chart plays it too
        page.wait_for_function(
            f"(n) => {{ const p = ({PATHS})(); return p && p.sgd.length < n; }}",
            arg=steps + 1,
            timeout=scaled(30_000),
        )
    for page in (presenter, viewer):  # and on to the last step
        page.wait_for_function(
            f"(n) => {{ const p = ({PATHS})(); return p && p.sgd.length === n; }}",
            arg=steps + 1,
            timeout=scaled(60_000),
        )
    for page in (presenter, viewer):
        page.context.close()


def test_a_click_on_the_surface_starts_the_paths_there(room: tuple[Room, Any]) -> None:
    lab, browser = room
    page = presenter_on_the_playground(lab, browser)
    drawn(page)
    # On himmelblau's view, away from every path, on a point of the grid a click picks from.
    page.mouse.click(*page.evaluate(PIXEL, [-4.0, 0.5]))
    page.wait_for_function(
        f"() => {{ const p = ({PATHS})(); return p && p.sgd[0] === -4; }}",
        timeout=scaled(60_000),
    )
    # The fields come after the chart in the page, so a busy browser may show them a
    # moment later.
    for label, value in (("start x", "-4.00"), ("start y", "0.50")):
        page.wait_for_function(
            "([label, value]) => [...document.querySelectorAll('input')].some("
            " i => i.getAttribute('aria-label') === label && i.value === value)",
            arg=[label, value],
            timeout=scaled(30_000),
        )
    assert all(xs[0] == -4 for xs in page.evaluate(PATHS).values())
    page.context.close()
