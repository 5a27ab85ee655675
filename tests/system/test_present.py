"""`optlab present` end to end, on 127.0.0.1 only: the real command serves the dashboard,
Debian's Chromium opens the audience URL (no control on any page, no key in any page) and
the presenter URL (every control; the address bar drops the key), and the key appears in
no log, no command line and no output but the banner's one presenter URL."""

from __future__ import annotations

import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.engine.client import log_path
from core.store import Store
from tests.apptest import written_run
from tests.browser import ARTIFACTS, NEEDS_CHROMIUM, buttons, chromium, screenshot, settle
from tests.room import Room, served
from tests.viewer_actions import CONTROLS
from tests.waiting import overdue, scaled, wait_for
from ui import nav

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]

RUN_ID = "ended"
OTHER_ID = "newest"  # the newest run: what the presenter's Live opens on
# Each page a viewer may open, by its address under the site's root (Recipes last).
PAGES = tuple(
    shown.url_path + (f"?runs={RUN_ID}" if shown in (nav.LIVE, nav.COMPARE) else "")
    for shown in nav.PAGES
    if not shown.presenters_only
)
INPUTS = "[data-testid=stFileUploader], [data-testid=stSlider], [data-testid=stNumberInput]"


@pytest.fixture(scope="module")
def room(tmp_path_factory) -> Iterator[Room]:
    folder = tmp_path_factory.mktemp("room")
    store = folder / "lab.sqlite"
    written_run(Store(store), RUN_ID, "an ended run")
    written_run(Store(store), OTHER_ID, "the presenter's run")
    with served(folder, store) as room:
        yield room


def test_the_banner_gives_both_urls_on_the_address_asked(room: Room) -> None:
    assert room.audience.startswith("http://127.0.0.1:") and room.audience.endswith("/")
    assert room.presenter == f"{room.audience}?key={room.key}" and len(room.key) >= 40
    assert "▀" in room.output.read_text() or "▄" in room.output.read_text()  # the QR code


def test_the_audience_url_shows_no_control_and_no_key(room: Room) -> None:
    with chromium() as browser:
        page = browser.new_page()
        for path in PAGES:
            page.goto(room.audience + path)
            settle(page)
            shown = buttons(page) & CONTROLS
            assert not shown, (path, shown)
            assert not page.locator(INPUTS).count(), path
            assert room.key not in page.content(), path
            assert "Train" not in page.locator("[data-testid=stSidebar]").inner_text(), path
        screenshot(page, "present-viewer-recipes")
        page.goto(room.audience + nav.TRAIN.url_path)
        settle(page)
        assert "Train is the presenter's" in page.content()
        assert not buttons(page) & CONTROLS and room.key not in page.content()


def test_the_presenter_url_shows_the_controls_and_drops_the_key(room: Room) -> None:
    with chromium() as browser:
        page = browser.new_page()
        page.goto(room.presenter)
        settle(page)
        page.wait_for_function("() => !window.location.search.includes('key=')")
        page.get_by_role("button", name="Start the demo race").wait_for()
        assert {"Start the demo race", "Tag", "Delete"} <= buttons(page)
        assert "Share with the room" in page.content()
        assert room.key not in page.url
        screenshot(page, "present-presenter-home")
        page.locator("[data-testid=stSidebar] a", has_text="Live").click()
        page.wait_for_url(f"**{nav.LIVE.url}**")
        settle(page)
        page.get_by_role("button", name="Clone").wait_for()  # the same session: still in control
        page.locator("[data-testid=stSidebar] a", has_text="Train").click()
        settle(page)
        page.get_by_role("button", name="Start training").wait_for()


def test_the_key_is_in_no_log_command_line_or_later_output(room: Room) -> None:
    with chromium() as browser:  # a visit of each, so that the logs have had their say
        for url in (room.presenter, room.audience + "?key=not-the-key"):
            page = browser.new_page()
            page.goto(url)
            settle(page)
    output = room.output.read_text()
    assert output.count(room.key) == 1  # the banner's presenter URL, and nothing after
    engine_log = log_path(str(room.store))
    wait_for(engine_log.exists, 60, "the engine's log")
    assert room.key not in engine_log.read_text()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            assert room.key.encode() not in cmdline.read_bytes()
        except OSError:
            continue  # a process that has gone


def test_a_viewers_live_follows_the_presenters_within_a_refresh(room: Room) -> None:
    """The presenter's Live (its newest run) and a viewer's Live opened on another run:
    the viewer's shows the presenter's run, and the presenter's group of charts within a
    refresh of its own; a group of its own stops it following, until it asks again."""
    with chromium() as browser:
        presenter = browser.new_page(viewport={"width": 1024, "height": 768})
        presenter.goto(room.presenter)
        presenter.get_by_role("button", name="Start the demo race").wait_for()
        presenter.locator("[data-testid=stSidebar] a", has_text="Live").click()
        presenter.wait_for_url(f"**{nav.LIVE.url}**")
        choose(presenter, "Per layer")
        viewer = browser.new_page(viewport={"width": 1024, "height": 768})
        viewer.goto(f"{room.audience}{nav.LIVE.url_path}?runs={RUN_ID}")
        # The presenter's run replaces the viewer's, and its group of charts follows.
        viewer.get_by_text("the presenter's run", exact=False).first.wait_for(
            timeout=scaled(60_000)
        )
        picked(viewer, "Per layer", "the viewer's Live to show Per layer")
        choose(presenter, "Instruments")
        picked(viewer, "Instruments", "the viewer's Live to follow within a refresh", 30)
        for page, who in ((presenter, "presenter"), (viewer, "viewer")):
            settle(page)
            page.screenshot(path=str(ARTIFACTS / f"present-live-{who}.png"))
        choose(viewer, "Training")  # its own: following stops
        viewer.get_by_role("button", name="Follow the presenter").click()
        picked(viewer, "Instruments", "the viewer's Live to follow again", 30)


def picked(page: Any, group: str, what: str, seconds: float = 60) -> None:
    """Waits until Live's one group picker shows `group` picked, up to `seconds` nominal
    seconds."""
    if not shows_picked(page, group, seconds):
        pytest.fail(overdue(what, seconds))


def shows_picked(page: Any, group: str, seconds: float) -> bool:
    """Whether Live's one group picker shows `group` picked within `seconds` nominal seconds
    (while a page runs again, the last picker lingers beside the new one)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(
            """(name) => {
                const found = [...document.querySelectorAll('button[role=radio]')]
                    .filter(b => b.innerText.trim() === name);
                return found.length === 1 && found[0].getAttribute('aria-checked') === 'true';
            }""",
            arg=group,
            timeout=scaled(seconds * 1000),
        )
    except PlaywrightTimeout:
        return False
    return True


def choose(page: Any, group: str, seconds: float = 120) -> None:
    """Picks `group` in Live's group picker. The page refreshes every few seconds in a
    room, and a click that lands during a refresh can go nowhere: it is made again until
    the picker shows `group`, up to `seconds` nominal seconds."""

    def clicked_and_shown() -> bool:
        settle(page)
        page.get_by_role("radio", name=group, exact=True).first.click()
        return shows_picked(page, group, 10)

    wait_for(clicked_and_shown, seconds, f"{group} picked on {page.url}")


def test_sigterm_stops_the_dashboard(room: Room) -> None:
    port = urllib.parse.urlsplit(room.audience).port
    room.process.terminate()
    room.process.wait(scaled(30))
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2)
