"""The README's Playground shot at a projector's 1024×768, in Chromium, on a fresh lab:
Rosenbrock's valley raced by momentum, projected gradient descent on its ball (the dashed
circle), Adam with its gradient clipped (diamonds) and plain SGD at a rate that diverges.
`python docs/screenshots/playground_shot.py FOLDER` writes `playground.png` there (this
folder's was made so)."""

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.watching import lab_with_a_browser
from tests.browser import settle
from ui import nav

OUT = Path(sys.argv[1])
OUT.mkdir(parents=True, exist_ok=True)
RACERS = {"momentum": "0.001", "projected_gd": "0.002", "clipped_adam": "0.05", "sgd": "0.01"}
DRAWN = """(n) => { const p = document.querySelector('.js-plotly-plot');
    return p && p._fullData && p._fullData.filter(t => t.meta === 'animated'
        && !t.name.includes(':')).length === n; }"""


def pick(page: Any, label: str, option: str) -> None:
    page.locator("[data-testid='stSelectbox']").filter(has_text=label).first.click()
    page.get_by_role("option", name=option, exact=True).click()
    settle(page)


def typed(page: Any, label: str, value: str, index: int = 0) -> None:
    field = page.get_by_label(label, exact=True).nth(index)
    field.fill(value)
    field.press("Enter")
    settle(page)


with lab_with_a_browser() as (_, url, browser, _):
    page = browser.new_page(viewport={"width": 1024, "height": 768})
    page.goto(url + nav.PLAYGROUND.url)
    page.wait_for_function(DRAWN, arg=3, timeout=120_000)
    pick(page, "surface", "rosenbrock")
    # Rosenbrock's own start in the fields before the next click, which would send the
    # fields as the browser holds them.
    page.get_by_label("start x", exact=True).and_(page.locator("[value='-1.2']")).wait_for()
    chooser = page.locator("[data-testid='stMultiSelect']").first
    chooser.locator("[aria-label='Clear all']").click()  # the default race
    settle(page)
    for name in RACERS:
        chooser.locator("input").fill(name)
        page.get_by_role("option", name=name, exact=True).click()
        settle(page)
    page.keyboard.press("Escape")
    for index, rate in enumerate(RACERS.values()):
        typed(page, "learning_rate", rate, index)
    page.wait_for_function(DRAWN, arg=len(RACERS), timeout=60_000)
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    page.get_by_role("heading", name="Playground").scroll_into_view_if_needed()
    page.mouse.move(0, 0)  # no hover label, no mode bar
    page.screenshot(path=str(OUT / "playground.png"))
    print("shot playground", flush=True)
