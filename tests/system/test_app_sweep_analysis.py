"""The Sweep page's analysis views (streamlit.testing.v1.AppTest): drawn for a stored
study, their contour's knobs picked on the page, and redrawn as a real sweep's trials end."""

from __future__ import annotations

import json
from typing import Any

from streamlit.testing.v1 import AppTest

from core.engine.client import EngineClient
from core.sweep import Sweep
from core.sweep.analysis import completed
from tests.apptest import live_specs, page
from tests.sweep_studies import BASE, SPACE, stored_study
from tests.waiting import scaled, wait_for
from ui import nav


def figures(at: AppTest) -> dict[str, dict[str, Any]]:
    """The page's live charts, by their `uirevision` (see core.charts.sweep_analysis)."""
    drawn = [json.loads(spec) for spec in live_specs(at)]
    return {figure["layout"]["uirevision"]: figure for figure in drawn}


def points(figure: dict[str, Any], name: str) -> int:
    """How many points the figure's trace `name` draws."""
    trace = next(t for t in figure["data"] if t.get("name") == name)
    return len(trace["x"]["bdata"] if isinstance(trace["x"], dict) else trace["x"])


def test_a_stored_studys_views_and_summary_are_drawn_and_its_contour_picks_its_knobs(
    lab: EngineClient,
) -> None:
    study = stored_study(lab, "stored")
    done = len(completed(study))
    at = page(nav.SWEEP).run()
    assert not at.exception, [e.value for e in at.exception]
    drawn = figures(at)
    history = drawn["sweep/history"]
    assert points(history, "trial") == done
    importance = drawn["sweep/importance"]
    assert [t["name"] for t in importance["data"]] == ["PED-ANOVA", "fANOVA"]
    assert importance["data"][0]["y"][-1] == "learning_rate"  # on top: it decides the value
    curves = drawn["sweep/curves"]
    assert points(curves, "pruned here") == len(study.trials) - done > 0
    assert drawn["sweep/edf"]["layout"]["title"]["text"] == "Distribution of val_accuracy (EDF)"
    for knob in ("learning_rate", "clip_norm", "batch_size"):
        assert drawn[f"sweep/slice/{knob}"]["layout"]["xaxis"]["title"]["text"] == knob
    contour = drawn["sweep/contour/learning_rate/clip_norm"]
    assert contour["layout"]["xaxis"]["title"]["text"] == "learning_rate"  # as picked
    assert contour["layout"]["xaxis"]["type"] == "log" == contour["layout"]["yaxis"]["type"]
    summary = next(m.value for m in at.markdown if "Best validation" in m.value)
    shown = summary.replace("\\", "")  # as the page shows it, without the escapes
    assert "- Knobs that matter, in order: learning_rate " in shown
    # The evaluator named, and on how many trials: the values are Optuna's own on them.
    assert f"(importance by PED-ANOVA, Optuna's default evaluator, on all {done} trials; " in shown
    plan = next(c.value for c in at.caption if "search · seed" in c.value).replace("\\", "")
    assert "a trial's value: the best val_accuracy its run validated at, not the last" in plan
    assert "- Widen learning_rate: the best trials sit at the high edge" in shown

    at.selectbox(key="sweep:contour:x:stored").select("batch_size").run()
    at.selectbox(key="sweep:contour:y:stored").select("learning_rate").run()
    assert not at.exception
    contour = figures(at)["sweep/contour/batch_size/learning_rate"]
    assert contour["layout"]["yaxis"]["type"] == "log"
    assert contour["layout"]["xaxis"].get("type") != "log"  # batch sizes are choices


def test_the_views_are_redrawn_as_a_running_sweeps_trials_end(lab: EngineClient) -> None:
    from ui import state

    n_trials = 8
    sweep = Sweep(lab, BASE, SPACE, n_trials=n_trials, sampler="random", parallel=1)
    sweep.submit()  # the engine process drives it, as the page hands it over
    state.sweeps()[sweep.study_name] = sweep
    try:
        wait_for(lambda: sweep.status().finished >= 1, 120, "a first trial to end")
        at = page(nav.SWEEP).run()
        assert not at.exception, [e.value for e in at.exception]
        seen = points(figures(at)["sweep/history"], "trial")
        assert 1 <= seen < n_trials
        # Later trials end (the trials a page drew, and enough to tell importances by).
        wait_for(lambda: len(completed(sweep.study)) >= max(seen + 1, 4), 300, "more trials to end")
        at.run()
        later = figures(at)
        assert points(later["sweep/history"], "trial") > seen
        importance = later["sweep/importance"]
        assert [t["name"] for t in importance["data"]] == ["PED-ANOVA", "fANOVA"]
        assert sorted(importance["data"][0]["y"]) == sorted(a.name for a in sweep.plan.axes)
    finally:
        sweep.stop()
        sweep.wait(scaled(60))
