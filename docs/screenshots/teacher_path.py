"""The teacher's path at a projector's 1024×768, in Chromium, on a fresh lab: Home, the
1-minute demo race on Live, Live's presentation view (Training, Per layer, Instruments),
and Compare and Home once the race has ended. `python docs/screenshots/teacher_path.py FOLDER`
writes `teacher-*.png` there (this folder's were made so, on 2026-12-07)."""

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.watching import lab_with_a_browser

OUT = Path(sys.argv[1])
OUT.mkdir(parents=True, exist_ok=True)
VIEW = {"width": 1024, "height": 768}


def shot(page: Any, name: str) -> None:
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    page.screenshot(path=str(OUT / f"teacher-{name}.png"))
    print("shot", name, flush=True)


with lab_with_a_browser() as (client, url, browser, _):
    page = browser.new_page(viewport=VIEW)
    page.goto(url)
    page.get_by_role("button", name="Start the demo race").wait_for(timeout=60000)
    page.get_by_role("radio", name="1 minute", exact=True).click()
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']")
    shot(page, "1-home")
    page.get_by_role("button", name="Start the demo race").click()
    page.wait_for_url(f"{url}/Live**", timeout=60000)
    page.wait_for_selector(".js-plotly-plot", timeout=60000)
    time.sleep(6)
    shot(page, "2-live")
    page.get_by_text("Presentation view", exact=True).click()
    page.wait_for_url("**view=presentation**", timeout=60000)
    time.sleep(20)
    shot(page, "3-presentation-training")
    page.get_by_text("Per layer", exact=True).click()
    time.sleep(8)
    shot(page, "4-presentation-per-layer")
    page.get_by_text("Instruments", exact=True).click()
    time.sleep(8)
    shot(page, "5-presentation-instruments")
    while any(run.active for run in client.list()):
        time.sleep(1)
    ids = [run.id for run in client.list()[:3]]
    page.goto(f"{url}/Compare?runs={','.join(ids)}")
    page.wait_for_selector(".js-plotly-plot", timeout=60000)
    time.sleep(5)
    shot(page, "6-compare")
    page.goto(url)
    page.get_by_role("button", name="Watch live").wait_for(timeout=60000)
    shot(page, "7-home-runs")
