"""The pages over runs that have ended (streamlit.testing.v1.AppTest): two short runs
trained once for the module, on a store its tests only read."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from core.readable import number
from tests.apptest import finished_run, live_specs, page
from tests.conftest import app_serving
from ui import nav


@pytest.fixture(scope="module")
def ended(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, list[str]]]:
    """The app's engine client, and two short runs (seeds 0 and 1) trained to their end."""
    from ui import state

    path = tmp_path_factory.mktemp("ended") / "lab.sqlite"
    with pytest.MonkeyPatch.context() as monkeypatch, app_serving(str(path), monkeypatch):
        lab = state.shared_engine()
        yield lab, [finished_run(lab, seed=seed) for seed in (0, 1)]


def test_clone_prefills_the_train_form(ended) -> None:
    lab, (_, run_id) = ended
    at = page(nav.TRAIN)
    at.session_state["prefill"] = lab.status(run_id).config
    at.run()
    assert at.selectbox(key="run:optimizer").value == "sgd"
    assert at.text_input(key="knob:sgd:radius").value == "20"
    assert at.text_input(key="run:seed").value == "1"


def test_live_page_shows_a_run_with_every_chart(ended) -> None:
    _, (run_id, _) = ended
    at = page(nav.LIVE)
    at.session_state["watch"] = [run_id]
    at.run()
    assert not at.exception
    assert "completed" in at.markdown[0].value
    # One group of charts at a time: the training charts first.
    for view, charts in (("Training", 5), ("Per layer", 3), ("Instruments", 6)):
        at.segmented_control(key="live_charts").set_value(view).run()
        assert not at.exception
        assert len(live_specs(at)) == charts, view


def test_compare_page_overlays_runs(ended) -> None:
    _, ids = ended
    at = page(nav.COMPARE)
    at.session_state["compare"] = ids
    at.run()
    assert not at.exception
    assert len(at.dataframe[0].value) == 2
    # parallel axes; four charts, and the three per-layer ones per run; the instruments
    assert len(at.get("plotly_chart")) == 1 + (5 + 3 * 2) + 6


def test_the_live_selection_is_in_the_url(ended) -> None:
    _, (first, second) = ended
    at = page(nav.LIVE)
    at.query_params["runs"] = f"{second},unknown-run"
    at.run()
    assert at.multiselect(key="live_runs").value == [second]
    assert at.query_params["runs"] == second
    at.multiselect(key="live_runs").select(first).run()
    assert at.query_params["runs"] == f"{second},{first}"


def test_live_shows_a_private_runs_odometer_and_its_budget(ended) -> None:
    """A DP-SGD run's card: ε spent as its last logged dp_epsilon, and its budget's share;
    a run without DP-SGD shows none."""
    lab, (plain_id, _) = ended
    budget = {"dp_clip": 1.0, "dp_noise": 1.1, "dp_delta": 1e-5, "dp_epsilon_budget": 50.0}
    run_id = finished_run(lab, **budget)
    spent = lab.metrics(run_id)["dp_epsilon"][-1]
    at = page(nav.LIVE)
    at.session_state["watch"] = [run_id]
    at.run()
    (odometer,) = at.metric
    assert odometer.label == "privacy spent, ε" and odometer.value == number(spent, 3)
    (bar,) = [p for p in at.get("progress") if "of the budget" in p.proto.text]
    assert bar.proto.text == f"{spent / 50:.0%} of the budget ε = 50"
    at.session_state["watch"] = [plain_id]
    assert not at.run().metric
