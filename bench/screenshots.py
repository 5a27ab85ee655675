"""`make screenshots`: the README's tour, shot from a real lab into `docs/images/`.

The lab as a user runs it, on a fresh store (`bench.watching.lab_with_a_browser`: the
engine process, `streamlit run app.py`, Debian's Chromium): the demo race's short length
(three LeNet runs on mnist-5k, 3 epochs each) and an 8-trial sweep of a small MLP on the
8×8 digits, both trained for real; then each page is opened at 1280×800 once they have
ended, so that every shot shows finished runs and is the same from one make to the next
but for the numbers (on Recipes, the clipping recipe is run from its card, and shot with
its verdict). Each page is waited for by what it shows (the script settled, its
charts drawn), never by a fixed time: the lab's machine is often loaded. A shot is saved
as a PNG of at most `COLOURS` colours (charts and text need no more), which keeps the
whole tour to a few hundred KB.

    python -m bench.screenshots            # every shot
    python -m bench.screenshots live home  # those named only
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.watching import lab_with_a_browser
from core.demo_race import race_configs
from core.engine.client import EngineClient
from ui import nav

IMAGES = Path(__file__).resolve().parents[1] / "docs" / "images"
VIEWPORT = {"width": 1280, "height": 800}
COLOURS = 96
#: How long the race and the sweep may take to end, and a page to show what it should.
#: Generous: on the lab's 2-core machine, loaded, the race alone takes a minute or two.
TRAINING_PATIENCE = 1200.0
PAGE_PATIENCE_MS = 180_000
SWEEP = "tour"
SWEEP_FLAGS = (
    *("--model", "mlp", "--dataset", "digits", "--optimizer", "adamw", "--epochs", "4"),
    *("--param", "learning_rate=1e-4:3e-1:log", "--param", "batch_size=32,64,128"),
    *("--trials", "8", "--sampler", "tpe", "--sampler-seed", "0", "--parallel", "2"),
    *("--study", SWEEP),
)
# Every chart on the page exists and draws at least one point (as tests.browser).
_CHARTS_DRAWN = """(least) => {
    const plots = [...document.querySelectorAll('.js-plotly-plot')];
    const drawn = plots.filter(p => (p._fullData || []).some(
        t => (t.x && t.x.length) || (t.z && t.z.length)
             || (t.dimensions && t.dimensions.length)));
    return plots.length >= least && drawn.length === plots.length;
}"""


@dataclass(frozen=True)
class Shot:
    """One picture: the page at `address` (after the app's URL), once its script has run
    and at least `charts` charts are drawn, then `then` (which clicks or scrolls to the
    view shown), saved as `docs/images/NAME.png`."""

    name: str
    address: str
    charts: int = 0
    then: Callable[[Any], None] | None = None


def settle(page: Any) -> None:
    """Waits until the app has run its script, every widget is drawn, and it has painted
    twice; raises if the page shows an error (a tour shows none)."""
    page.wait_for_selector(
        "[data-testid='stApp'][data-test-script-state='notRunning']", timeout=PAGE_PATIENCE_MS
    )
    # A widget whose code is still loading is drawn as a grey placeholder meanwhile.
    page.wait_for_function(
        "() => !document.querySelector(\"[data-testid^='stSkeleton']\")", timeout=PAGE_PATIENCE_MS
    )
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    error = page.locator("[data-testid='stException']")
    if error.count():
        raise RuntimeError(f"{page.url} shows an error: {error.first.inner_text()[:500]}")


def charts_drawn(page: Any, least: int) -> None:
    """Waits until at least `least` charts are on the page and every one draws a point."""
    page.wait_for_function(_CHARTS_DRAWN, arg=least, timeout=PAGE_PATIENCE_MS)


def pick_group(name: str, shows: str, charts: int = 1) -> Callable[[Any], None]:
    """Picks Live's chart group `name`, then waits for the text `shows` (which only that
    group's view holds, so the charts that follow are its own) and its charts, and
    scrolls to that text."""

    def pick(page: Any) -> None:
        page.get_by_text(name, exact=True).first.click()
        page.get_by_text(shows).first.wait_for(timeout=PAGE_PATIENCE_MS)
        settle(page)
        charts_drawn(page, charts)
        scroll_to(page.get_by_text(shows).first)

    return pick


def to_charts(page: Any) -> None:
    """Scrolls to Live's chart groups, below each run's panel."""
    scroll_to(page.locator("[data-testid='stButtonGroup']").first)


def to_analysis(page: Any) -> None:
    """Scrolls to a sweep's analysis, below the form and the trials."""
    heading = page.get_by_role("heading", name="Analysis")
    heading.wait_for(timeout=PAGE_PATIENCE_MS)
    charts_drawn(page, 5)  # the trials' coordinates, then history, importance, ...
    scroll_to(heading)


def run_recipe(title: str) -> Callable[[Any], None]:
    """Clicks **Run it** on the card of the recipe `title`, and waits for its verdict and
    its key charts (the page shows the recipe it started above the cards)."""

    def run(page: Any) -> None:
        card = page.locator("[data-testid='stVerticalBlock']").filter(has_text=title).last
        card.get_by_role("button", name="Run it").click()
        verdict = page.get_by_text(re.compile(r"^(Reproduced|Not reproduced here)\.$"))
        verdict.first.wait_for(timeout=PAGE_PATIENCE_MS)
        settle(page)
        charts_drawn(page, 1)

    return run


def scroll_to(element: Any) -> None:
    """Scrolls Streamlit's own container (the window does not scroll) so that `element`
    is at the top of the view."""
    element.evaluate("e => e.scrollIntoView({block: 'start'})")
    settle(element.page)


def shots(race: Sequence[str]) -> list[Shot]:
    runs = ",".join(race)
    return [
        Shot("home", nav.HOME.url),
        Shot("train", nav.TRAIN.url),
        Shot("live", f"{nav.LIVE.url}?runs={runs}", charts=4, then=to_charts),
        Shot("live-runs", f"{nav.LIVE.url}?runs={runs}", charts=4),
        Shot(
            "live-per-layer",
            f"{nav.LIVE.url}?runs={runs}",
            4,
            pick_group("Per layer", "per-layer every"),
        ),
        Shot(
            "live-instruments",
            f"{nav.LIVE.url}?runs={runs}",
            2,
            pick_group("Instruments", "Measured"),
        ),
        Shot("presentation", f"{nav.LIVE.url}?runs={runs}&view=presentation", charts=4),
        Shot("compare", f"{nav.COMPARE.url}?runs={runs}", charts=2),
        Shot("sweep", nav.SWEEP.url, charts=1, then=to_analysis),
        Shot("recipes", nav.RECIPES.url, then=run_recipe("Clipping lets a larger step train")),
        Shot("optimizers", nav.OPTIMIZERS.url),
    ]


def train(client: EngineClient) -> list[str]:
    """The race and the sweep, trained to their end; the race's run ids."""
    store = str(client.store.location)
    sweep = subprocess.Popen(
        [sys.executable, "-m", "core", "sweep", "--store", store, *SWEEP_FLAGS],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    race = client.start_all(race_configs("short"))
    deadline = time.monotonic() + TRAINING_PATIENCE
    while any(client.status(run_id).active for run_id in race) or sweep.poll() is None:
        if time.monotonic() > deadline:
            sweep.kill()
            raise TimeoutError(f"training did not end within {TRAINING_PATIENCE:.0f} s")
        time.sleep(1.0)  # polling a condition, with the deadline above
    output = sweep.communicate()[0]
    if sweep.returncode != 0:
        raise RuntimeError(f"the sweep failed:\n{output[-3000:]}")
    ended = {client.status(run_id).status for run_id in race}
    if ended != {"completed"}:
        raise RuntimeError(f"the race's runs ended {sorted(ended)}")
    return race


def save(page: Any, name: str) -> Path:
    """The page's screenshot, reduced to `COLOURS` colours, as `docs/images/NAME.png`."""
    from PIL import Image  # Streamlit's dependency

    path = IMAGES / f"{name}.png"
    page.screenshot(path=str(path))
    with Image.open(path) as shot:
        small = shot.convert("RGB").quantize(COLOURS, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)
    return path


def main(names: Sequence[str]) -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    with lab_with_a_browser() as (client, url, browser, _):
        started = time.monotonic()
        race = train(client)
        print(f"trained in {time.monotonic() - started:.0f} s", flush=True)
        page = browser.new_page(viewport=VIEWPORT)
        for shot in shots(race):
            if names and shot.name not in names:
                continue
            page.goto(url + shot.address)
            settle(page)
            if shot.charts:
                charts_drawn(page, shot.charts)
            if shot.then is not None:
                shot.then(page)
            path = save(page, shot.name)
            print(f"{path.relative_to(IMAGES.parents[1])}: {path.stat().st_size // 1024} KB")


if __name__ == "__main__":
    main(sys.argv[1:])
