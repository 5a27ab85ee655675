"""Watching never changes a run (issue 10), in Chromium against `streamlit run` and its
engine.

- Watching never changes a run: three runs watched with every knob expander open, a
  reload, a second tab, and the runs ending under the user's eyes record no knob change
  (nor pause, resume or stop) that nobody asked for.
- The demo race starts its three runs at once and all three finish, watched, with data
  in every chart and instrument. Its target (≤ 30 s from the click) is `make bench`
  figure 11's; here the time is printed and held under a looser guard that the old
  queued race (140-260 s) fails and a slow machine does not.
- The page server never loads TensorFlow.

How much watching slows a run is timed alone, in `test_watching.py`. Each test writes
what it measured to `test-artifacts/watching.txt`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from bench.watching import race as demo_race
from tests.browser import (
    KNOB_PANEL,
    NEEDS_CHROMIUM,
    knob_panel_opened,
    open_live,
    record,
    screenshot,
    settle,
    wait_for_drawn_charts,
)
from tests.waiting import scaled, wait_for
from ui import nav

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]

RACE_GUARD = 90.0  # seconds; the target, 30, is bench figure 11's (issue 10, target 3)
STOP_SECONDS = 5.0  # from the stop command to the run's end, final validation included
# Runs with every live knob that a slider could change on by mistake.
WATCHED = (
    {"optimizer": "adamw", "hyperparameters": {"learning_rate": 0.001, "weight_decay": 0.01}},
    {
        "optimizer": "sgd",
        "hyperparameters": {
            "learning_rate": 0.05,
            "clip_norm": 1.0,
            "noise_std": 0.001,
            "prune_threshold": 1e-4,
        },
    },
    {"optimizer": "projected_gd", "hyperparameters": {"learning_rate": 0.05, "radius": 12.0}},
)
UNASKED = ("knob", "paused", "resumed")
# Steps each watched run trains in the first tab's window (twice as many in the second's):
# about 15 s on an idle 2-core machine, several refreshes of every chart and slider.
WATCH_STEPS = 1500


def open_knob_expanders(page: Any) -> None:
    panels = page.locator("[data-testid='stExpander']").filter(has_text=KNOB_PANEL)
    for panel in panels.all():
        # A busy 2-core machine (three runs, the page server, the browser) is slow to
        # answer a click; what is tested is that nothing changes, not how fast.
        wait_for(lambda p=panel: knob_panel_opened(p), 240, "a knob panel open", interval=0)


def watch(page: Any, client: Any, run_ids: list[str], steps: int) -> None:
    """Waits while `page` watches until every run has trained `steps` more steps and the
    page's loss chart has drawn them (its refreshes, and its sliders', ran meanwhile)."""
    targets = {run_id: client.status(run_id).step + steps for run_id in run_ids}
    wait_for(
        lambda: all(client.status(r).step >= target for r, target in targets.items()),
        timeout=300,
        what=f"the watched runs to train {steps} more steps",
    )
    page.wait_for_function(
        """(step) => [...document.querySelectorAll('.js-plotly-plot')].some(p =>
            p.layout && p.layout.uirevision === 'loss' && (p._fullData || []).some(
                t => t.x && t.x.length && Number(t.x[t.x.length - 1]) >= step))""",
        arg=min(targets.values()),
        timeout=scaled(120_000),
    )


def test_the_demo_race_starts_at_once_and_ends_watched(watched_lab) -> None:
    client, url, browser, _ = watched_lab
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    clicked, race = demo_race(page, url, client)
    assert sorted(r.config["optimizer"] for r in race) == ["adamw", "projected_gd", "sgd"]
    starts = [r.started - clicked for r in race]
    ends = [r.finished - clicked for r in race]
    record(
        "demo race, watched: started "
        + ", ".join(f"{s:.1f}" for s in starts)
        + " s after the click; ended "
        + ", ".join(f"{e:.1f}" for e in ends)
        + " s after it"
    )
    assert {r.status for r in race} == {"completed"}
    # Together, none queued behind another. From the click it is about 1 s here (0.2-1.1 s
    # measured); on a loaded machine the page's answer to the click comes later.
    assert max(starts) - min(starts) < scaled(2.0), "the three runs did not start at once"
    assert max(starts) < scaled(10.0), "the race started late"
    assert max(ends) <= scaled(RACE_GUARD)

    for run in race:  # every instrument measured
        metrics = client.metrics(run.id)
        for key in ("alpha", "sharpness", "noise_scale", "distance_from_init", "grad_norm"):
            assert key in metrics.keys, (run.config["optimizer"], key)
        assert [e for e in client.events(run.id) if e.kind == "histogram"]
    # The full refresh after the runs ended: each is shown completed.
    page.wait_for_function(
        "document.body.innerText.split('completed').length > 3", timeout=scaled(60_000)
    )
    for view, charts in (("Training", 5), ("Per layer", 9), ("Instruments", 6)):
        page.get_by_text(view, exact=True).click()
        # The group's charts replace the last one's (which linger while it draws).
        wait_for_drawn_charts(page, charts, what=view)
        screenshot(page, f"live-demo-race-{view.lower().replace(' ', '-')}", height=3000)
    page.close()


def test_watching_never_changes_a_run(watched_lab) -> None:
    client, url, browser, _ = watched_lab
    base = {"model": "mlp", "dataset": "digits", "epochs": 10_000, "log_every": 1}
    ids = [client.start({**base, **run, "name": f"watched {run['optimizer']}"}) for run in WATCHED]
    try:
        first = open_live(browser, url, ids)
        open_knob_expanders(first)
        watch(first, client, ids, WATCH_STEPS)
        first.reload()
        first.wait_for_selector(".js-plotly-plot", state="attached", timeout=scaled(60_000))
        open_knob_expanders(first)
        second = open_live(browser, url, ids)
        open_knob_expanders(second)
        watch(second, client, ids, 2 * WATCH_STEPS)
        stop_seconds = []
        for stopped, run_id in enumerate(ids, 1):  # the runs end while both tabs watch
            asked = time.monotonic()
            assert client.settle(client.stop(run_id)).error is None
            assert client.wait(run_id, scaled(30)).status == "stopped"
            stop_seconds.append(time.monotonic() - asked)
            first.wait_for_function(  # the tab has shown it stopped
                f"document.body.innerText.split('stopped').length > {stopped}",
                timeout=scaled(60_000),
            )
    finally:  # a failure leaves no run training into the next test
        for run_id in ids:
            if client.status(run_id).active:
                client.settle(client.stop(run_id))
    assert max(stop_seconds) < scaled(STOP_SECONDS), stop_seconds
    first.wait_for_function(
        "document.body.innerText.split('stopped').length > 3", timeout=scaled(30_000)
    )
    screenshot(first, "live-watched", height=2400)

    unasked = [
        (run_id, event.kind, event.step, event.payload)
        for run_id in ids
        for event in client.events(run_id)
        if event.kind in UNASKED
    ]
    assert not unasked, unasked
    record(
        f"watched 3 runs for about 60 s in two tabs: {len(unasked)} unasked events; "
        "stopped in " + ", ".join(f"{s:.2f}" for s in stop_seconds) + " s"
    )
    first.close()
    second.close()


def test_the_streamlit_process_never_imports_tensorflow(watched_lab) -> None:
    """What keeps the page server light (and Streamlit from clearing Keras's session
    after every refresh): after every page was shown, it has not loaded TensorFlow."""
    _, url, browser, pids = watched_lab
    (app_pid,) = pids["page server"]
    page = browser.new_page()
    for shown in (nav.HOME, nav.TRAIN, nav.LIVE, nav.COMPARE, nav.SWEEP, nav.OPTIMIZERS):
        page.goto(url + shown.url)
        page.wait_for_selector("h1", timeout=scaled(60_000))
        settle(page)
        assert page.locator("[data-testid='stException']").count() == 0, shown.title
    page.close()
    maps = Path(f"/proc/{app_pid}/maps").read_text()
    assert "_pywrap_tensorflow" not in maps and "libtensorflow" not in maps
