"""Watching costs nothing (issue 10): two Live tabs refreshing slow training little.

The steps per second of a run with two tabs open against none, in interleaved windows, in
Chromium against `streamlit run` and its engine. The target (≥ 0.90×) is `make bench`
figure 9's; here the ratio is printed and held above a looser floor, so that a noisy
machine cannot fail the suite while a regression to the old 10–40× slowdown does. It is
the one test that times training while it is watched, so `make test` runs it alone
(marked `serial`), after the others; what else watching must never do is in
`test_watched_runs.py`.

It writes what it measured to `test-artifacts/watching.txt`.
"""

from __future__ import annotations

import statistics

import pytest

from bench.watching import steps_per_second
from tests.browser import NEEDS_CHROMIUM, open_live, record, wait_for_drawn_charts
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.serial, NEEDS_CHROMIUM]

# A guard against the regression of issue 10 (watched runs ran at 0.03-0.25x), loose
# enough for a loaded 2-core CI runner (0.73 seen there); the target, 0.90, is measured
# interleaved by make bench's figure 9, in longer windows.
SPEED_FLOOR = 0.5
WINDOW_SECONDS = 4.0
# A LeNet epoch on mnist-5k is 63 steps: by this step its first traces, validation's
# included, are behind it.
WARM_STEPS = 200
TRAINING_CHARTS = 5  # Live's Training group for a classifier


def test_two_live_tabs_slow_training_little(watched_lab) -> None:
    client, url, browser, _ = watched_lab
    run_id = client.start(
        {"model": "lenet", "dataset": "mnist-5k", "epochs": 10_000, "name": "speed under watch"}
    )
    wait_for(  # past the first traces, the first validation's included
        lambda: client.status(run_id).step >= WARM_STEPS, timeout=120, what="the run to warm up"
    )
    ratios = []
    try:
        for _ in range(3):  # interleaved: no tab, two tabs
            alone = steps_per_second(client, run_id, WINDOW_SECONDS)
            tabs = [open_live(browser, url, [run_id]) for _ in range(2)]
            for tab in tabs:  # past the load of the app's scripts: every chart drawn
                wait_for_drawn_charts(tab, TRAINING_CHARTS, "a watching tab")
            watched = steps_per_second(client, run_id, WINDOW_SECONDS)
            for tab in tabs:
                tab.close()
            ratios.append(watched / alone)
    finally:
        client.settle(client.stop(run_id))
    ratio = statistics.median(ratios)
    record(
        "steps/s with two Live tabs vs none: median "
        f"{ratio:.2f}× (pairs: {', '.join(f'{r:.2f}' for r in ratios)})"
    )
    assert ratio >= SPEED_FLOOR
