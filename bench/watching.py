"""Figure 9: a run's speed while two browser tabs watch it on Live, against no tab; and
figure 11: the demo race, from the click to the end of its last run, watched.

The lab as a user runs it, on this machine's cores: the engine process, `streamlit run
app.py`, and Debian's Chromium with two tabs on the Live page of a LeNet run. Windows
with the two tabs open (A, from a few seconds after they opened) and with none (B)
alternate on the same run; each is timed from the run's own logged steps. Where the
cores go in a watched window (the engine, the page server, the browser) is printed with
the row.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.cores import CoreShares, processes
from bench.figures import Settings
from bench.rows import Measured, NotMeasured, Quantity
from core.engine.client import EngineClient
from core.store import RunRecord, Store
from ui import nav

TABS = 2
WINDOW_SECONDS = 8.0
# Opening a tab loads and compiles the app's scripts (seconds of CPU): the figure is about
# tabs that are open, so each watched window starts this long after they were.
SETTLE_SECONDS = 8.0
#: How long a demo race may take before it counts as stuck.
RACE_PATIENCE = 180.0
ENGINE_LOG = "engine.log"  # beside the store
RUN = {"model": "lenet", "dataset": "mnist-5k", "epochs": 10_000, "name": "watched"}


def race(
    page: Any,
    url: str,
    client: EngineClient,
    length: str = "short",
    also_watching: Sequence[Any] = (),
) -> tuple[float, list[RunRecord]]:
    """Picks the race's `length` and clicks "Start the demo race" on the Home page at `url`
    (open in `page`), then waits for its three runs to end, watched by the Live tab it
    switches to and by the tabs `also_watching`, opened on the same Live address; returns
    the click's time and the three runs. Its deadlines follow the machine's speed, as
    the tests' do (`tests.waiting`; one of them watches a race)."""
    from tests.waiting import met_within, scaled

    page.goto(url)
    page.get_by_role("button", name="Start the demo race").wait_for(timeout=scaled(60_000))
    page.get_by_role("radio", name=length, exact=True).click()  # a segmented control
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']")
    clicked = time.time()
    page.get_by_role("button", name="Start the demo race").click()
    page.wait_for_url(f"{url}{nav.LIVE.url}**", timeout=scaled(60_000))
    for tab in also_watching:
        tab.goto(page.url)
    if not met_within(lambda: not any(run.active for run in client.list()), RACE_PATIENCE, 0.2):
        raise TimeoutError(f"the race did not end within {RACE_PATIENCE:.0f} s, scaled")
    runs = client.list()[:3]
    if any(run.status != "completed" for run in runs):
        # Say why: a run's error, or the engine's log if the engine itself went away.
        log = Path(str(client.store.location)).with_name(ENGINE_LOG)
        tail = log.read_text(errors="replace")[-4000:] if log.exists() else "(no log)"
        ended = [(run.status, run.step, run.error) for run in runs]
        raise RuntimeError(f"the race's runs ended {ended}; the engine's log ends:\n{tail}")
    return clicked, runs


@contextlib.contextmanager
def lab_with_a_browser() -> Iterator[tuple[EngineClient, str, Any, dict[str, set[int]]]]:
    """The lab as a user runs it, on a fresh store: its engine process (warm), `streamlit
    run app.py`, and Chromium. Yields the engine's client, the app's URL, the browser, and
    the pids of the engine and the page server."""
    from tests import app_server
    from tests.browser import chromium
    from tests.waiting import met_within

    if not app_server.CHROMIUM.exists():
        raise NotMeasured("no Chromium at /usr/bin/chromium (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        store = Path(folder) / "lab.sqlite"
        engine = app_server.start_engine(store, Path(folder) / ENGINE_LOG)
        stack.callback(app_server.end, engine)
        app, port = app_server.start(store, Path(folder) / "streamlit.log")
        stack.callback(app_server.stop, app)
        client = EngineClient(Store(store))
        stack.callback(client.close)

        def warm() -> bool:  # its lock file is written before its row: no row yet, maybe
            service = client.engine()
            return service is not None and bool(service.info.get("ready"))

        if not met_within(warm, 60, interval=0.2):
            raise NotMeasured("the engine did not warm up within 60 s, scaled")
        browser = stack.enter_context(chromium())
        pids = {"engine": {engine.pid}, "page server": {app.pid}}
        yield client, f"http://127.0.0.1:{port}", browser, pids


def demo_race(settings: Settings) -> Measured:
    """Seconds from the click to the end of the demo race's last run, the lab warm."""
    with lab_with_a_browser() as (client, url, browser, _):
        page, other = (browser.new_page(viewport={"width": 1400, "height": 1000}) for _ in "ab")
        clicked, runs = race(page, url, client, also_watching=[other])
    ends = [run.finished - clicked for run in runs if run.finished is not None]
    if len(ends) < 3 or {run.status for run in runs} != {"completed"}:
        raise NotMeasured(f"the race's runs ended {sorted(run.status for run in runs)}")
    return Measured(
        a=Quantity(max(ends), "s"),
        detail="Its runs ended " + ", ".join(f"{end:.1f}" for end in ends) + " s after it.",
    )


def steps_per_second(client: EngineClient, run_id: str, seconds: float) -> float:
    """The run's speed over the next `seconds`, from its logged steps' wall times."""
    started = time.time()
    time.sleep(seconds)
    metrics = client.metrics(run_id)
    inside = (metrics["wall_time"] >= started) & (metrics["wall_time"] <= started + seconds)
    steps, times = metrics.steps[inside], metrics["wall_time"][inside]
    return float((steps[-1] - steps[0]) / (times[-1] - times[0]))


def two_live_tabs(settings: Settings) -> Measured:
    """Median steps/s of a LeNet run with two Live tabs open (A) and none (B)."""
    with lab_with_a_browser() as (client, url, browser, groups):
        run_id = client.start(RUN)
        try:
            time.sleep(settings.pick(10.0, 6.0))  # past the first traces
            shares = CoreShares()

            def watched() -> float:
                tabs = [browser.new_page() for _ in range(TABS)]
                for tab in tabs:
                    tab.goto(f"{url}{nav.LIVE.url}?runs={run_id}")
                for tab in tabs:
                    tab.wait_for_selector(".js-plotly-plot", timeout=60_000)
                time.sleep(SETTLE_SECONDS)
                groups["browser"] = processes(("browser", b"chromium"))["browser"]
                with shares.window(groups):
                    speed = steps_per_second(client, run_id, WINDOW_SECONDS)
                for tab in tabs:
                    tab.close()
                return speed

            paired = settings.interleave(
                watched, lambda: steps_per_second(client, run_id, WINDOW_SECONDS), settle=None
            )
        finally:
            client.settle(client.stop(run_id))
    return Measured.compared(
        paired, "steps/s", detail=f"In the watched windows, of one core: {shares}."
    )
