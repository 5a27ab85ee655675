"""The Sweep form's objective box (streamlit.testing.v1.AppTest): the sweep it starts is
scored by the objective picked (and time to target by its target), handed to the engine
process; a target missing is named under the form, and nothing is written."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from core.engine.client import EngineClient
from core.sweep import Sweep, list_studies
from tests.apptest import fill_sweep_form, page
from tests.waiting import scaled
from ui import nav


def start(at: AppTest) -> None:
    at.toggle(key="sweep:pruning").set_value(False).run()
    at.button(key="sweep:start").click().run()
    assert not at.exception


def test_the_picked_objective_scores_the_sweep_the_form_starts(lab: EngineClient) -> None:
    at = page(nav.SWEEP).run()
    fill_sweep_form(at, n_trials=1)
    box = at.selectbox(key="sweep:objective")
    assert box.value is None and "val_accuracy" in box.format_func(None)  # digits' metric
    box.select("time_to_target").run()
    at.number_input(key="sweep:target").set_value(0.2).run()
    start(at)
    assert not at.error, [e.value for e in at.error]
    [summary] = list_studies(lab)
    sweep = Sweep.load(lab, summary.study_name)
    objective = sweep.plan.objective
    assert (objective.name, objective.target, objective.direction) == (
        "time_to_target",
        0.2,
        "minimize",
    )
    assert sweep.wait(scaled(120)).state == "done"  # the engine drove it


def test_time_to_target_without_a_target_is_named_and_nothing_is_written(
    lab: EngineClient,
) -> None:
    at = page(nav.SWEEP).run()
    fill_sweep_form(at, n_trials=1)
    at.selectbox(key="sweep:objective").select("time_to_target").run()
    start(at)
    assert any("target" in e.value and "is required" in e.value for e in at.error)
    assert list_studies(lab) == [] and lab.list() == []
