"""Figure 5: building the dashboard's Live figures for 4 runs of 50,000 logged steps.

The runs are written through a real store and read back, so the charts get what a page
refresh gets. The figure times `core.charts.live_figures` and reports the size of the JSON
that Plotly sends to the browser for those figures.
"""

from __future__ import annotations

import importlib
import tempfile
from pathlib import Path
from types import ModuleType

import plotly.io

from bench import profiling, synthetic
from bench.figures import Settings
from bench.rows import Measured, NotMeasured, Quantity
from bench.timing import median_seconds
from core.store import Store

RUNS = 4
STEPS = 50_000
TIMED_BUILDS = 5


def live_figures(settings: Settings) -> Measured:
    """Median seconds of one `live_figures` call, after a warm one; raises `NotMeasured`
    while `core.charts` does not exist."""
    del settings  # the workload is the target's: a quick run measures it in full too
    charts = _charts_module()
    with tempfile.TemporaryDirectory() as folder, Store(Path(folder) / "bench.sqlite") as store:
        runs = []
        for index in range(1, RUNS + 1):
            run_id = f"run{index}"
            synthetic.write_run(store, run_id, STEPS)
            metrics, events = store.read_metrics(run_id), store.events(run_id)
            runs.append(charts.RunView(run_id, f"run {index}", metrics, events))
    seconds = median_seconds(lambda: charts.live_figures(runs), runs=TIMED_BUILDS)
    figures = charts.live_figures(runs)
    payload = sum(len(plotly.io.to_json(f, validate=False).encode()) for f in figures.values())
    traces = sum(len(f.data) for f in figures.values())
    return Measured(
        a=Quantity(seconds, "s"),
        b=Quantity(payload, "B"),
        detail=(
            f"{len(figures)} figures, {traces} traces, from {RUNS} runs × {STEPS:,} steps × "
            f"{len(synthetic.STEP_KEYS) + len(synthetic.EPOCH_KEYS)} series."
        ),
        diagnose=lambda: (
            "Profiled with cProfile, the time goes to "
            f"{profiling.python_hotspots(lambda: charts.live_figures(runs))}."
        ),
    )


def _charts_module() -> ModuleType:
    """`core.charts`; raises `NotMeasured` if it does not exist (it came after the bench)."""
    try:
        return importlib.import_module("core.charts")
    except ModuleNotFoundError as exc:
        if exc.name == "core.charts":
            raise NotMeasured("core.charts missing") from None
        raise
