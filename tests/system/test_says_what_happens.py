"""The lab in front of a room says what is happening and nothing else (issue 53), against
`python -m ui.serve run app.py` and its engine process, in Debian's Chromium.

The app starts on a fresh store, with its `static/` folder somewhere that does not exist
yet; its engine imports TensorFlow only once a gate (a file) opens, so that the minutes
before it are for the test to look at. Three runs hold what a page finds hard to write: a
learning rate of 10⁻⁷ (tiny updates), one that diverges (a loss that is not a number,
huge gradients), and a cosine schedule ending at η = 0 (a flat loss along its last update).
The tests run in this file's order: the first looks at the runs before the gate opens.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from core.engine.client import EngineClient
from core.store import Store
from tests import app_server
from tests.browser import NEEDS_CHROMIUM, settle
from tests.waiting import scaled, wait_for
from ui import nav

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]

# `python -m ui.serve`, with the app's static folder (Streamlit's, and where `ui.live_chart`
# copies Plotly) at the path given first.
SERVED_WITH_STATIC_AT = """
import runpy, sys
from pathlib import Path
import streamlit.file_util
import ui.live_chart
static = Path(sys.argv.pop(1))
ui.live_chart.STATIC = static
streamlit.file_util.get_app_static_dir = lambda main_script_path: str(static)
runpy.run_module("ui.serve", run_name="__main__", alter_sys=True)
"""
# `python -m core serve`, whose training stack loads once the file given first exists.
GATED_ENGINE = """
import sys, time
from pathlib import Path
from core.training import tf_import
gate, load = Path(sys.argv[1]), tf_import.load
def gated() -> None:
    while not gate.exists():
        time.sleep(0.05)
    load()
tf_import.load = gated
from core.cli import main
raise SystemExit(main(sys.argv[2:]))
"""
BASE = {"dataset": "digits", "model": "mlp", "max_steps": 40, "log_every": 1}
RUNS = {
    "tiny": {"optimizer": "adamw", "hyperparameters": {"learning_rate": 1e-7}},
    "blows up": {
        "optimizer": "sgd",
        "hyperparameters": {"learning_rate": 100.0, "noise_std": 100.0},
    },
    "cosine": {
        "optimizer": "sgd",
        "lr_schedule": "cosine",
        "checkpoint_every": 20,
        "hyperparameters": {"learning_rate": 0.5},
    },
}
# Every text of a page: its own, and its charts' (titles, ticks, legends, annotations).
SHOWN_TEXT = """() => document.body.innerText + '\\n' + [...document.querySelectorAll(
    '.js-plotly-plot svg text')].map(t => t.textContent).join('\\n')"""
# What no reader should meet: Python's and d3's exponents (1e+02, 1e−7: signed, unlike a
# run id's hex digits), "nan", "None", and Plotly's SI prefixes (928.17μ).
UNREADABLE = re.compile(r"\bnan\b|\bNone\b|\d[eE][+−-]\d|[µμ]", re.IGNORECASE)
# Streamlit's client asks for its health and host config under the page's path first
# (/Live/_stcore/health), and logs the 404s: none of the lab's doing.
STREAMLIT_PROBES = re.compile(r"/_stcore/(health|host-config)$")


@dataclass
class Lab:
    url: str
    store: Path
    log: Path
    gate: Path
    static: Path
    client: EngineClient


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Iterator[Lab]:
    folder = tmp_path_factory.mktemp("says")
    store, gate, static = folder / "lab.sqlite", folder / "gate", folder / "static"
    engine = app_server.start_engine(
        store, folder / "engine.log", command=("-c", GATED_ENGINE, str(gate))
    )
    log = folder / "streamlit.log"
    app, port = app_server.start(store, log, command=("-c", SERVED_WITH_STATIC_AT, str(static)))
    client = EngineClient(Store(store))
    try:
        yield Lab(f"http://127.0.0.1:{port}", store, log, gate, static, client)
    finally:
        gate.touch()
        client.close()
        app_server.stop(app)
        engine.terminate()
        engine.wait(scaled(30))


@pytest.fixture(scope="module")
def runs(lab: Lab) -> dict[str, str]:
    """The three runs by name, handed to the engine together (queued while it loads)."""
    configs = [{**BASE, "name": name, **config} for name, config in RUNS.items()]
    return dict(zip(RUNS, lab.client.start_all(configs), strict=True))


@pytest.fixture(scope="module")
def trained(lab: Lab, runs: dict[str, str]) -> dict[str, str]:
    """The three runs, ended: the gate opened for them if it was not."""
    lab.gate.touch()
    for run_id in runs.values():
        assert lab.client.wait(run_id, scaled(300)).status in ("completed", "diverged")
    return runs


def computed_landscape(lab: Lab, run_id: str) -> str:
    """`run_id`, once the landscape around its last checkpoint (step 40) is computed."""
    if lab.client.landscape(run_id, 40) is None:
        lab.client.ask_landscape(run_id, 40)
        wait_for(lambda: lab.client.landscape(run_id, 40), 120, "the landscape", interval=0.2)
    return run_id


def shown_text(page: Any) -> str:
    return page.evaluate(SHOWN_TEXT)


def charts_drawn(page: Any, *, with_data: bool = False) -> None:
    """Waits until the page holds charts and Plotly has drawn every one (each with a
    point, when `with_data`)."""
    page.wait_for_function(
        """(withData) => {
            const plots = [...document.querySelectorAll('.js-plotly-plot')];
            return plots.length > 0 && plots.every(p => p._fullLayout
                && (!withData || (p._fullData || []).some(t => t.x && t.x.length)));
        }""",
        arg=with_data,
        timeout=scaled(120_000),
    )


def opened(
    browser: Any, url: str, errors: list[str] | None = None, viewport: dict | None = None
) -> Any:
    """A page on `url` once its script has run, its console's errors and uncaught
    exceptions going to `errors` (but Streamlit's own probes')."""
    page = browser.new_page(viewport=viewport or {"width": 1400, "height": 1000})
    if errors is not None:
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on(
            "console",
            lambda message: (
                errors.append(message.text)
                if message.type == "error"
                and not STREAMLIT_PROBES.search(message.location.get("url", ""))
                else None
            ),
        )
    page.goto(url)
    settle(page)
    return page


def test_the_server_starts_without_a_warning_of_its_static_folder(lab: Lab) -> None:
    """A fresh checkout has no `static/` (git ignores what is copied there): Streamlit
    warned "Static file serving is enabled, but no static folder found" at each start."""
    assert "static folder" not in lab.log.read_text()
    assert lab.static.is_dir()


def test_live_says_the_engine_loads_tensorflow_until_the_first_step(
    lab: Lab, runs: dict[str, str], browser: Any
) -> None:
    """For half a minute after the lab starts, a run started waits for the engine's
    TensorFlow: Live said "queued", "step 0/?" and "no data yet" on every chart."""
    page = opened(browser, f"{lab.url}{nav.LIVE.url}?runs={','.join(runs.values())}")
    page.get_by_text("waiting for the engine to load TensorFlow").first.wait_for()
    text = page.inner_text("body")
    assert "No step logged yet: the engine is loading TensorFlow" in text
    assert "0/?" not in text and "no data yet" not in shown_text(page)
    lab.gate.touch()
    charts_drawn(page, with_data=True)
    assert "loading TensorFlow" not in page.inner_text("body")


def test_switching_chart_groups_leaves_the_console_clean(
    lab: Lab, trained: dict[str, str], browser: Any
) -> None:
    """Each chart taken off the page by a switch was resized out of it: "Resize must be
    passed a displayed plot div element", five uncaught errors a switch."""
    errors: list[str] = []
    page = opened(browser, f"{lab.url}{nav.LIVE.url}?runs={trained['tiny']}", errors)
    charts_drawn(page)
    for group in ("Per layer", "Instruments", "Training", "Per layer"):
        page.get_by_text(group, exact=True).first.click()
        settle(page)
        charts_drawn(page)
    assert errors == []


def test_no_page_writes_numbers_no_reader_can_read(
    lab: Lab, trained: dict[str, str], browser: Any
) -> None:
    """Not "nan", "None", 1e+02, 1e−7 or 928.17μ, on the pages of runs whose numbers are
    tiny, huge and not numbers at all."""
    ids = ",".join(trained.values())
    page = opened(browser, lab.url)
    unreadable = {"Home": UNREADABLE.findall(shown_text(page))}
    page = opened(browser, f"{lab.url}{nav.LIVE.url}?runs={ids}")
    charts_drawn(page)
    for group in ("Training", "Per layer", "Instruments"):
        page.get_by_text(group, exact=True).first.click()
        settle(page)
        charts_drawn(page)
        unreadable[f"Live: {group}"] = UNREADABLE.findall(shown_text(page))
    page = opened(browser, f"{lab.url}{nav.COMPARE.url}?runs={ids}")
    charts_drawn(page)
    unreadable["Compare"] = UNREADABLE.findall(shown_text(page))
    assert {name: found for name, found in unreadable.items() if found} == {}


def test_the_landscape_of_a_last_checkpoint_says_its_batch_and_why_it_is_flat(
    lab: Lab, trained: dict[str, str], browser: Any
) -> None:
    """A cosine schedule ends at η = 0: the loss along the last update is flat, which the
    chart now says. The caption said "on the batch of step 41" of a 40-step run, and the
    plane's second axis reused η, the learning rate's letter."""
    run_id = computed_landscape(lab, trained["cosine"])
    page = opened(browser, f"{lab.url}{nav.LIVE.url}?runs={run_id}")
    page.get_by_text("Loss landscape").click()
    page.get_by_text("Flat along the update").wait_for(timeout=scaled(60_000))
    text = shown_text(page)
    assert "Loss at step 40 on its own batch (the run's last)" in text
    assert "step 41" not in text
    assert "random direction δ₁" in text and "random direction δ₂" in text
    assert "random direction η" not in text


# At a projector's 1024×768 ---------------------------------------------------------------

PROJECTOR = {"width": 1024, "height": 768}
# Each chart shown on the page, as drawn: its title's and plot's boxes, its y tick labels'
# boxes, its legend's entries, and each trace's name and line colour (the view's one legend,
# a figure marked by ui/live_chart.js, is no chart).
CHARTS = """() => [...document.querySelectorAll('.js-plotly-plot:not(.optlab-legend)')].filter(
        plot => plot.getBoundingClientRect().height > 0  // not one on its way out
    ).map(plot => {
    const box = element => { const r = element.getBoundingClientRect();
        return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; };
    const title = plot.querySelector('.gtitle');
    return {
        chart: box(plot),
        title: title ? title.textContent : '',
        titleBox: title ? box(title) : null,
        plot: box(plot.querySelector('.nsewdrag')),
        yticks: [...plot.querySelectorAll('.ytick text')].filter(
            t => t.textContent && t.getAttribute('opacity') !== '0').map(box),
        legend: plot.querySelectorAll('.legend .traces').length,
        traces: (plot._fullData || []).map(t => ({name: t.name, colour: t.line && t.line.color,
            shown: t.showlegend})),
    };
})"""


# A title each group of Live's charts has, and the others do not.
GROUP_TITLES = {"Training": "Loss", "Per layer": "per layer", "Instruments": "initial weights"}


def show_group(page: Any, group: str) -> None:
    """Picks Live's `group` of charts, and waits until they are drawn."""
    page.get_by_text(group, exact=True).first.click()
    page.wait_for_function(
        """(title) => [...document.querySelectorAll('.gtitle')].some(
            t => t.textContent.includes(title))""",
        arg=GROUP_TITLES[group],
        timeout=scaled(60_000),
    )
    charts_drawn(page)


def charts_on(page: Any) -> list[dict[str, Any]]:
    return page.evaluate(CHARTS)


def overlapping(boxes: list[dict[str, float]]) -> bool:
    """Whether any two boxes overlap (tick labels that a reader cannot tell apart)."""
    return any(
        a["top"] < b["bottom"] and b["top"] < a["bottom"] and a["left"] < b["right"]
        and b["left"] < a["right"]
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
    )  # fmt: skip


def test_home_at_1024_cuts_no_button(lab: Lab, trained: dict[str, str], browser: Any) -> None:
    """Home's six run buttons were cut to "W…", "Co…", "Cl…", "Re…", "T…", "D…"."""
    errors: list[str] = []
    page = opened(browser, lab.url, errors, PROJECTOR)
    page.get_by_role("button", name="Clone into Train").wait_for(timeout=scaled(60_000))
    # Each button's label (its <p>, without its icon's name), and whether it shows whole.
    labels = page.evaluate(
        """() => [...document.querySelectorAll('[data-testid="stMain"] button')]
            .flatMap(b => [...b.querySelectorAll('p')])
            .map(p => [p.textContent.trim(), p.scrollWidth > p.clientWidth + 1])"""
    )
    shown = {text for text, _ in labels}
    assert {"Watch live", "Compare", "Clone into Train", "Resume"} <= shown, sorted(shown)
    assert [text for text, cut in labels if cut] == [] and errors == []


def test_the_presentation_view_of_three_runs_at_1024_reads_from_the_back(
    lab: Lab, trained: dict[str, str], browser: Any
) -> None:
    """One legend for the view (the runs by colour, the series by line), no chart's own;
    plots at least 200 px tall; no two y tick labels on each other; a colour a run on
    every tab; no console error. With three runs the first plot was 100 px tall under six
    legend entries, and log ticks overlapped (2 over 1, 0.2 over 0.1)."""
    errors: list[str] = []
    ids = ",".join(trained.values())
    url = f"{lab.url}{nav.LIVE.url}?runs={ids}&view=presentation"
    page = opened(browser, url, errors, PROJECTOR)
    charts_drawn(page)
    colours: dict[str, set[str]] = {name: set() for name in trained}
    for group in ("Training", "Per layer", "Instruments"):
        show_group(page, group)
        legend = page.locator(".optlab-legend .legendtext").all_text_contents()
        assert set(trained) <= {text.strip("\u200b") for text in legend}, (group, legend)
        for chart in charts_on(page):
            what = f"{group}: {chart['title']}"
            assert chart["legend"] == 0, what  # the view's legend says it once
            assert chart["plot"]["bottom"] - chart["plot"]["top"] >= 200, what
            assert not overlapping(chart["yticks"]), what
            for trace in chart["traces"]:
                name = trace["name"] or ""
                run = next((n for n in trained if name.startswith(f"{n} · ")), None)
                if run is not None and trace["colour"]:
                    colours[run].add(trace["colour"])
    assert all(len(found) == 1 for found in colours.values()), colours  # one colour a run
    assert len({next(iter(found)) for found in colours.values()}) == 3
    assert errors == []


def test_per_layer_rows_compare_runs_on_one_metric_and_titles_fit(
    lab: Lab, trained: dict[str, str], browser: Any
) -> None:
    """In the normal view, two charts a row: Per layer put a run's step norm beside
    another's update ratio; titles were cut at the chart's edge ("…and th") or under the
    mode bar, which now stands upright at the right."""
    ids = ",".join(trained.values())
    page = opened(browser, f"{lab.url}{nav.LIVE.url}?runs={ids}", viewport=PROJECTOR)
    charts_drawn(page)
    for chart in charts_on(page):  # the Training charts
        box = chart["titleBox"]
        assert box is None or box["right"] <= chart["chart"]["right"] - 30, chart["title"]
    show_group(page, "Per layer")
    rows: dict[float, set[str]] = {}
    for chart in charts_on(page):
        if "per layer" not in chart["title"]:  # (a wrapped title's lines join unspaced)
            continue  # a run's landscape, in its panel above
        metric = chart["title"].split("per layer")[0].strip()
        rows.setdefault(round(chart["chart"]["top"]), set()).add(metric)
    assert len(rows) >= 3 and all(len(metrics) == 1 for metrics in rows.values()), rows


def test_the_landscape_contour_is_wide_enough_to_read(
    lab: Lab, trained: dict[str, str], browser: Any
) -> None:
    """At 1024 px, beside the slices, the contour's plot was about 65 px wide."""
    run_id = computed_landscape(lab, trained["cosine"])
    page = opened(browser, f"{lab.url}{nav.LIVE.url}?runs={run_id}", viewport=PROJECTOR)
    page.get_by_text("Loss landscape").click()
    page.get_by_text("Flat along the update").wait_for(timeout=scaled(60_000))
    charts_drawn(page)
    (contour,) = [c for c in charts_on(page) if c["title"].startswith("Loss around step")]
    assert contour["plot"]["right"] - contour["plot"]["left"] >= 300
