"""Figure 13: a Live chart refresh for 4 runs of 10 million logged steps, against the same at
10 thousand.

A refresh is what the Live page's chart fragment does every few seconds, through the same
code: for each watched run its status, its metrics for the charts (`ui.views.run_view`:
the store's multi-resolution summaries, see `core.store.summaries`), events and
checkpoints, then the Training view's figures. The runs are written through a real store
(`bench.synthetic.write_long_run`: the Training view's series at every step, the
validation ones at every epoch's end) and read back by an `EngineClient`, as the
dashboard reads them.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

from bench import synthetic
from bench.figures import Settings
from bench.rows import Measured, Quantity
from bench.timing import median_seconds, seconds_per_call
from core import charts
from core.engine.client import EngineClient
from core.store import Store
from ui import views

RUNS = 4
LONG, SHORT = 10_000_000, 10_000
# The stores' folders, removed when the bench ends.
_FOLDERS: list[tempfile.TemporaryDirectory[str]] = []


def long_vs_short(settings: Settings) -> Measured:
    """Figure 13a: seconds per refresh at `LONG` steps (A) vs at `SHORT` (B)."""
    long, short = _lab(settings.pick(LONG, 100_000)), _lab(SHORT)
    paired = settings.interleave(
        seconds_per_call(functools.partial(refresh, long)),
        seconds_per_call(functools.partial(refresh, short)),
    )
    return Measured.compared(
        paired,
        "s",
        detail=_sizes(long),
    )


def long_refresh(settings: Settings) -> Measured:
    """Figure 13b: the median seconds of a refresh at `LONG` steps, held to a bound."""
    long = _lab(settings.pick(LONG, 100_000))
    seconds = median_seconds(functools.partial(refresh, long), runs=settings.pairs)
    return Measured(a=Quantity(seconds, "s"), detail=_sizes(long))


def refresh(lab: EngineClient) -> int:
    """One Live chart refresh of every run of `lab`; returns how many traces it drew."""
    shown = [views.run_view(lab, lab.status(run.id)) for run in lab.list()]
    return sum(len(figure.data) for figure in charts.training_figures(shown).values())


def _sizes(lab: EngineClient) -> str:
    run = lab.list()[0]
    read = lab.overview(run.id)
    return (
        f"{RUNS} runs × {run.step:,} steps × {len(read.keys)} series; a refresh reads "
        f"{len(read):,} rows of each ({len(read) * len(read.keys) * 8 / 1e3:,.0f} kB of "
        f"float64), whatever the length."
    )


@functools.cache
def _lab(steps: int) -> EngineClient:
    """A store of `RUNS` runs of `steps` steps, kept for the whole bench (figures 13a
    and 13b read the same), and a client on it."""
    _FOLDERS.append(folder := tempfile.TemporaryDirectory(prefix="optlab-refresh-"))
    store = Store(Path(folder.name) / "refresh.sqlite")
    for index in range(RUNS):
        synthetic.write_long_run(store, f"run{index + 1}", steps, seed=index)
    return EngineClient(store)
