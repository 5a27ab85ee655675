"""A room on one `optlab present`, in Chromium (issue 53, items 1 and 9): the presenter's
browser stays the presenter across reloads, with the key in no address, and no other
browser, made-up token or earlier process's token does; and every browser shows the
recipes as the store holds them: a viewer follows the presenter onto Recipes and sees its
recipe train and end, two recipes' verdicts stand at once, and a reload, a second browser
and the viewer show them alike; then the viewer follows the presenter onto another page."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from core.presenter import KEY_VARIABLE
from core.recipes import RECIPES
from tests import app_server
from tests.browser import NEEDS_CHROMIUM, buttons, screenshot, settle
from tests.room import Room, served
from tests.viewer_actions import CONTROLS
from tests.waiting import scaled, wait_for
from ui import nav
from ui.presenter_cookie import PREFIX
from ui.recipe_view import CARD

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]

# What a recipe's verdict box begins with once every run has ended.
FINAL = ("Reproduced.", "Not reproduced here.", "Inconclusive here.")
# Two of the shortest recipes, started one after the other.
FIRST, SECOND = RECIPES["edge_of_stability"], RECIPES["clipping"]


@pytest.fixture(scope="module")
def room(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Room]:
    folder = tmp_path_factory.mktemp("room")
    with served(folder, folder / "lab.sqlite") as room:
        yield room


@pytest.fixture
def new_page(browser: Any) -> Iterator[Callable[[], Any]]:
    """Opens a page in a browser of its own (a Playwright context: its own cookies), at a
    projector's 1024×768; closed after the test, so that no presenter's page of one test
    publishes its view into the next."""
    opened: list[Any] = []

    def new() -> Any:
        opened.append(browser.new_page(viewport={"width": 1024, "height": 768}))
        return opened[-1]

    yield new
    for page in opened:
        page.context.close()


def presenting(page: Any, room: Room) -> Any:
    """`page` on the presenter URL, once admitted and the key dropped."""
    page.goto(room.presenter)
    page.get_by_role("button", name="Start the demo race").wait_for()
    page.wait_for_function("() => !window.location.search.includes('key=')")
    return page


def watches(page: Any) -> bool:
    """Whether `page`, drawn, shows a viewer's lab: its sidebar, and no control."""
    settle(page)
    page.get_by_role("heading", name="Optimizer Lab").first.wait_for()
    return not buttons(page) & CONTROLS and "Train" not in sidebar(page)


def sidebar(page: Any) -> str:
    return page.locator("[data-testid=stSidebar]").inner_text()


def test_a_presenter_who_reloads_stays_the_presenter(room: Room, new_page: Any) -> None:
    presenter = presenting(new_page(), room)
    (cookie,) = [c for c in presenter.context.cookies() if c["name"].startswith(PREFIX)]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert room.key not in cookie["value"]
    presenter.reload()
    presenter.get_by_role("button", name="Start the demo race").wait_for()
    assert "key=" not in presenter.url and "Train" in sidebar(presenter)
    presenter.goto(room.audience + nav.TRAIN.url_path)  # a new session of the same browser
    presenter.get_by_role("button", name="Start training").wait_for()
    elsewhere = new_page()  # another browser: its own cookies
    elsewhere.goto(room.audience)
    assert watches(elsewhere)


def test_a_made_up_or_stale_token_admits_nobody(room: Room, new_page: Any, tmp_path: Path) -> None:
    port = app_server.free_port()
    forged = new_page()
    forged.context.add_cookies(
        [{"name": f"{PREFIX}{port}", "value": secrets.token_urlsafe(32), "url": room.audience}]
    )
    # A dashboard on `port` admits a browser, and stops; the one started next on the port
    # was not told its token.
    env = {KEY_VARIABLE: room.key}
    stale = new_page()
    for log, admitting in (("first.log", True), ("second.log", False)):
        process, _ = app_server.start(room.store, tmp_path / log, env=env, port=port)
        try:
            if admitting:
                stale.goto(f"http://127.0.0.1:{port}/?key={room.key}")
                stale.get_by_role("button", name="Start the demo race").wait_for()
            else:
                stale.goto(f"http://127.0.0.1:{port}/")  # its cookie as the first admitted it
                assert watches(stale)
                forged.goto(f"http://127.0.0.1:{port}/")
                assert watches(forged)
        finally:
            app_server.stop(process)  # the room's engine serves on


def card(page: Any, name: str) -> Any:
    return page.locator(f".st-key-{CARD}{name}")


def verdicts(page: Any) -> dict[str, str]:
    """Each recipe card's verdict box, as its text reads, by recipe name ("" for none)."""
    found = {}
    for name in RECIPES:
        box = card(page, name).locator("[data-testid=stAlert]")
        found[name] = box.first.inner_text() if box.count() else ""
    return found


def ended(page: Any, names: tuple[str, ...]) -> bool:
    """Whether `page`'s cards of `names` all show a final verdict."""
    shown = verdicts(page)
    return all(any(word in shown[name] for word in FINAL) for name in names)


def open_in_sidebar(page: Any, shown: nav.Page) -> None:
    page.locator("[data-testid=stSidebar] a", has_text=shown.title).click()
    page.wait_for_url(f"**{shown.url}**")
    settle(page)


def test_every_browser_shows_the_presenters_recipes_from_the_store(
    room: Room, new_page: Any
) -> None:
    presenter = presenting(new_page(), room)
    viewer = new_page()
    viewer.goto(room.audience)
    settle(viewer)
    open_in_sidebar(presenter, nav.RECIPES)
    viewer.wait_for_url(f"**{nav.RECIPES.url}**", timeout=scaled(30_000))  # led there
    settle(viewer)
    assert "Run it" not in viewer.locator("[data-testid=stMain]").inner_text()

    card(presenter, FIRST.name).get_by_role("button", name="Run it").click()
    # The viewer sees it train: its title over its charts, and how many runs have ended.
    viewer.get_by_role("heading", name=FIRST.title).wait_for(timeout=scaled(30_000))
    settle(presenter)
    card(presenter, SECOND.name).get_by_role("button", name="Run it").click()
    presenter.get_by_role("heading", name=SECOND.title).wait_for(timeout=scaled(30_000))
    names = (FIRST.name, SECOND.name)
    wait_for(lambda: ended(presenter, names), 300, "both recipes' verdicts", interval=1.0)
    seen = verdicts(presenter)
    screenshot(presenter, "recipes-two-verdicts", height=1600)

    presenter.reload()
    wait_for(lambda: ended(presenter, names), 60, "the verdicts after a reload", interval=0.5)
    second = new_page()
    second.goto(room.audience + nav.RECIPES.url_path)
    wait_for(lambda: ended(second, names), 60, "the verdicts in a second browser")
    wait_for(lambda: ended(viewer, names), 60, "the verdicts on the viewer")
    for page in (presenter, second, viewer):
        assert verdicts(page) == seen
    # The presenter shows the second recipe's charts (the last it started): so does the room.
    viewer.get_by_role("heading", name=SECOND.title).wait_for()

    open_in_sidebar(presenter, nav.COMPARE)
    viewer.wait_for_url(f"**{nav.COMPARE.url}**", timeout=scaled(30_000))
    assert viewer.locator("[data-testid=stException]").count() == 0
