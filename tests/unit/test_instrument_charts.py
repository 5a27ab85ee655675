"""Each instrument declares its charts as plain data beside its maths, and the Instruments
panel draws whatever `INSTRUMENTS` declares: a new instrument is one module."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import numpy as np
import pytest

from core.charts import INSTRUMENT_HELP, RunView, instrument_charts, instrument_figures
from core.store import Metrics
from core.training import instruments
from core.training.instruments import ChartSpec, Line, LineChart, Reference
from tests.imports import heavy_modules_after


def test_declaring_the_instruments_imports_no_plotting() -> None:
    """The training process imports the instruments: their charts are data, not Plotly."""
    assert heavy_modules_after("import core.training.instruments", ("plotly", "core.charts")) == []


def test_every_instrument_chart_is_on_the_panel_with_its_caption() -> None:
    declared = {key for cls in instruments.INSTRUMENTS.values() for key in cls.charts}
    assert declared <= set(instrument_charts())
    for cls in instruments.INSTRUMENTS.values():
        assert cls.help == {key: chart.help for key, chart in cls.charts.items()}
        assert cls.help.items() <= INSTRUMENT_HELP.items()


class Curvature(instruments.Instrument):
    """A made-up instrument: one value per layer, and a total held against a limit."""

    name = "curvature"
    field_help = "Measure the curvature"
    charts: ClassVar[Mapping[str, ChartSpec]] = {
        "curvature": LineChart(
            "Curvature per layer",
            help="How curved each layer's valley is.",
            lines=(Line("curvature", "total", total=True), Line("curvature", per_layer=True)),
            references=(Reference("limit", lambda run: (run.metrics.steps, np.full(3, 50.0))),),
            scale="log",
            overlaid=(Line("curvature", "total", markers=True, lines=False),),
        )
    }


@pytest.fixture
def curvature(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(instruments.INSTRUMENTS, Curvature.name, Curvature)


def curvature_run(run_id: str) -> RunView:
    steps = np.arange(1, 4)
    series = {
        "curvature": np.array([1.0, 2.0, 3.0]),
        "curvature/conv1": np.array([0.5, 1.0, 1.5]),
        "curvature/logits": np.array([0.5, 1.0, 1.5]),
    }
    return RunView(run_id, f"run {run_id}", Metrics(steps, series))


@pytest.mark.usefixtures("curvature")
def test_a_new_instrument_brings_its_chart_to_the_panel() -> None:
    figures = instrument_figures([curvature_run("a")])
    assert list(figures)[-1] == "curvature"  # after the others, in the order of INSTRUMENTS
    figure = figures["curvature"]
    assert figure.layout.title.text == "Curvature per layer"
    assert figure.layout.yaxis.type == "log"
    assert [t.name for t in figure.data] == ["total", "conv1", "logits", "run a · limit"]
    assert figure.layout.yaxis.range[1] > np.log10(50.0)  # the reference stays in view
    several = instrument_figures([curvature_run("a"), curvature_run("b")])["curvature"]
    names = [t.name for t in several.data]
    assert names == ["run a · total", "run a · limit", "run b · total", "run b · limit"]
    assert several.data[0].mode == "markers"


@pytest.mark.usefixtures("curvature")
def test_a_reference_waits_for_the_runs_own_lines() -> None:
    empty = RunView("a", "run a", Metrics(np.arange(1, 4), {}))
    assert instrument_figures([empty])["curvature"].data == ()
