"""`core.sweep.analysis` and `core.charts.sweep_analysis` on real Optuna studies (in
memory, trials made by a tiny objective or `optuna.trial.create_trial`): importances that
follow the data, with intervals; the best quarter's ranges and their edges; learning
curves with pruned trials; the written summary; and the figures drawn from them."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState, create_trial

from core.charts.layout import NO_DATA
from core.charts.style import PALETTE
from core.charts.sweep_analysis import (
    NO_TRIAL_YET,
    contour_figure,
    edf_figure,
    history_figure,
    importance_figure,
    learning_curve_figure,
    slice_figure,
)
from core.knobs import InvalidInput
from core.sweep.analysis import (
    METHODS,
    best_quarter,
    importance_lines,
    importances,
    learning_curves,
    summary_lines,
)
from core.sweep.objective import OBJECTIVE_ATTR
from core.sweep.trial_run import RUN_IDS, SPREAD

optuna.logging.set_verbosity(optuna.logging.WARNING)
LOG_RATE = FloatDistribution(1e-4, 1.0, log=True)
UNIT = FloatDistribution(0.0, 1.0)


def sampled(objective: Callable[[optuna.Trial], float], n: int, direction: str = "maximize"):
    """A study of `n` trials of `objective`, sampled at random with a fixed seed."""
    study = optuna.create_study(direction=direction, sampler=optuna.samplers.RandomSampler(0))
    study.optimize(objective, n_trials=n)
    return study


def made(direction: str, trials: list[tuple[dict, float]], distributions: dict) -> optuna.Study:
    """A study of completed trials with the given params and values."""
    study = optuna.create_study(direction=direction)
    for params, value in trials:
        study.add_trial(create_trial(params=params, distributions=distributions, value=value))
    return study


def on_x(trial: optuna.Trial) -> float:
    """A value that `x` alone decides; `y` and `optimizer` do nothing."""
    x = trial.suggest_float("x", 0.0, 1.0)
    trial.suggest_float("y", 0.0, 1.0)
    trial.suggest_categorical("optimizer", ["sgd", "adam"])
    return x


def on_y(trial: optuna.Trial) -> float:
    trial.suggest_float("x", 0.0, 1.0)
    return trial.suggest_float("y", 0.0, 1.0) ** 2


# Importances ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", list(METHODS))
def test_the_knob_that_decides_the_value_ranks_first_with_an_interval_clear_of_the_rest(
    method: str,
) -> None:
    for objective, decisive in ((on_x, "x"), (on_y, "y")):
        found = importances(sampled(objective, 30), method).knobs
        assert found[0].name == decisive, found
        others = found[1:]
        assert all(found[0].low > other.high for other in others), found  # type: ignore[operator]
        assert all(item.low <= item.value <= item.high for item in found)  # type: ignore[operator]


def test_importances_are_replayed_by_their_seed_and_a_single_evaluation_has_no_interval() -> None:
    study = sampled(on_x, 20)
    assert importances(study, "fanova", seed=3) == importances(study, "fanova", seed=3)
    single = importances(study, "fanova", resamples=0)
    first = single.knobs[0]
    assert first.name == "x" and first.low is None and first.high is None
    assert importance_lines(single)[0] == f"importance x {first.value:.4f}"
    assert single.describe() == "fANOVA with seed 0, on all 20 trials; no interval"
    lines = importance_lines(importances(study, "ped_anova"))
    assert lines[0].startswith("importance x ") and lines[0].endswith("]")
    assert len(lines) == 3


def test_too_few_trials_tell_nothing_and_bad_input_names_its_field() -> None:
    few = importances(sampled(on_x, 3), "fanova")
    assert few.knobs == () and few.untold == "told once 4 trials complete with a value; 3 have"
    with pytest.raises(InvalidInput) as caught:
        importances(sampled(on_x, 5), "shap")
    assert "method" in caught.value.errors
    with pytest.raises(InvalidInput) as caught:
        importances(sampled(on_x, 5), "fanova", resamples=-1)
    assert "resamples" in caught.value.errors


# Where the best trials lie -------------------------------------------------------------


def test_the_best_quarter_spans_the_best_trials_values_in_either_direction() -> None:
    rates = [1e-4, 1e-3, 1e-2, 0.03, 0.1, 0.3, 0.6, 1.0]
    space = {"lr": LOG_RATE, "optimizer": CategoricalDistribution(["sgd", "adam", "lion"])}
    trials = [
        ({"lr": rate, "optimizer": ["sgd", "adam", "lion"][i % 3]}, float(i))
        for i, rate in enumerate(rates)
    ]
    count, (lr, optimizer) = best_quarter(made("maximize", trials, space))
    assert count == 2 and (lr.low, lr.high) == (0.6, 1.0)  # values 6 and 7
    assert optimizer.choices == ("sgd", "adam")  # trials 6 and 7, in the choices' order
    assert (lr.search_low, lr.search_high, lr.log) == (1e-4, 1.0, True)
    count, (lr, optimizer) = best_quarter(made("minimize", trials, space))
    assert (lr.low, lr.high) == (1e-4, 1e-3) and optimizer.choices == ("sgd", "adam")
    assert best_quarter(optuna.create_study()) == (0, [])


def test_best_trials_at_an_edge_of_the_range_say_widen_it_measured_on_the_log_scale() -> None:
    rates = np.geomspace(1e-4, 1.0, 17)
    # Best at the top of the range: the high edge.
    rising = made("maximize", [({"lr": r}, math.log10(r)) for r in rates], {"lr": LOG_RATE})
    assert best_quarter(rising)[1][0].edge == "high"
    falling = made("minimize", [({"lr": r}, math.log10(r)) for r in rates], {"lr": LOG_RATE})
    assert best_quarter(falling)[1][0].edge == "low"
    # Best around 0.05: 5% of the range on a linear scale, but 67% on the log scale it
    # was searched on: inside, not at the edge.
    peak = [({"lr": r}, -abs(math.log10(r / 0.05))) for r in rates]
    assert best_quarter(made("maximize", peak, {"lr": LOG_RATE}))[1][0].edge is None
    # A linear knob whose best sit in its middle, or one best trial alone: no edge.
    middle = [({"x": x}, -abs(x - 0.5)) for x in np.linspace(0, 1, 12)]
    assert best_quarter(made("maximize", middle, {"x": UNIT}))[1][0].edge is None
    alone = [({"x": x}, x) for x in (0.2, 0.5, 1.0)]
    assert best_quarter(made("maximize", alone, {"x": UNIT}))[1][0].edge is None


# Learning curves -----------------------------------------------------------------------


def pruned_past_half(trial: optuna.Trial) -> float:
    """Reports 5 values; a trial with x > 0.5 is pruned after its third."""
    x = trial.suggest_float("x", 0.0, 1.0)
    for step in range(5):
        trial.report(x * step, step * 10)
        if x > 0.5 and step == 2:
            raise optuna.TrialPruned()
    return x


def test_learning_curves_hold_each_trials_reports_and_where_a_pruned_one_stopped() -> None:
    study = sampled(pruned_past_half, 8)
    curves = learning_curves(study)
    trials = study.get_trials()
    assert [c.number for c in curves] == [t.number for t in trials]
    for curve, trial in zip(curves, trials, strict=True):
        assert dict(zip(curve.steps, curve.values, strict=True)) == trial.intermediate_values
        if trial.state == TrialState.PRUNED:
            assert curve.state == "PRUNED" and curve.steps == (0, 10, 20)
            assert curve.stopped_at == (20, trial.params["x"] * 2)
        else:
            assert curve.state == "COMPLETE" and curve.steps[-1] == 40 and curve.stopped_at is None
    pruned = [c for c in curves if c.state == "PRUNED"]
    assert pruned and len(pruned) < len(curves)

    chart = learning_curve_figure(curves, "val_accuracy").to_plotly_json()
    marks = [t for t in chart["data"] if t["name"] == "pruned here"]
    assert len(marks) == 1
    assert list(zip(marks[0]["x"], marks[0]["y"], strict=True)) == [c.stopped_at for c in pruned]
    lines = [t for t in chart["data"] if t["mode"] == "lines"]
    assert len(lines) == len(curves)
    assert {t["name"] for t in lines} == {"completed", "pruned"}
    assert sum(t["showlegend"] for t in lines) == 2  # one legend entry a state


# The summary ---------------------------------------------------------------------------


def test_the_summary_gives_the_best_with_its_seeds_interval_the_knobs_in_order_and_widen() -> None:
    rates = np.geomspace(1e-4, 1.0, 16)
    study = optuna.create_study(direction="minimize")
    study.set_user_attr(OBJECTIVE_ATTR, "val_mae")
    space = {"lr": LOG_RATE, "x": UNIT}
    for i, rate in enumerate(rates):
        attrs = {RUN_IDS: ["a", "b", "c"], SPREAD: 0.01}
        params = {"lr": float(rate), "x": (i * 7 % 16) / 15}
        study.add_trial(
            create_trial(params=params, distributions=space, value=rate, user_attrs=attrs)
        )
    lines = summary_lines(study, importances(study))
    assert lines[0].startswith(
        "Best validation mean absolute error: 0.0001 ± 0.01 (95% interval over 3 seeds), "
        "trial 0: lr=0.0001, x=0."
    )
    assert lines[1].startswith("Knobs that matter, in order: lr ")
    assert lines[1].endswith(
        " (importance by PED-ANOVA, Optuna's default evaluator, on all 16 trials; 90% "
        "intervals over 16 bootstrap resamples)."
    )
    assert lines[2].startswith("The best quarter (4 of 16 completed trials) lie at: lr 0.0001–")
    assert lines[3:] == [
        "Widen lr: the best trials sit at the low edge of its search range 0.0001–1 (log)."
    ]


def test_the_summary_of_one_seed_says_so_and_of_no_trial_says_that() -> None:
    assert summary_lines(optuna.create_study(), []) == ["No trial has completed yet."]
    middle = [({"x": x}, -abs(x - 0.5)) for x in np.linspace(0, 1, 12)]
    study = made("maximize", middle, {"x": UNIT})
    lines = summary_lines(study, importances(study))
    assert lines[0].startswith("Best validation accuracy: -0.04545 (one seed: no interval")
    assert lines[-1].startswith("No search range needs widening")
    few = made("maximize", middle[:3], {"x": UNIT})
    lines = summary_lines(few, importances(few))
    assert lines[1] == "Which knobs matter is told once 4 trials complete with a value; 3 have."


def test_too_few_counts_what_did_not_complete_and_one_knob_says_why_it_is_not_told() -> None:
    # All four trials of a sweep ended, one of them pruned: "(3 so far)" read as if one
    # more were coming.
    space = {"lr": LOG_RATE, "x": UNIT}
    study = made("maximize", [({"lr": 10.0**-i, "x": i / 4}, i / 10) for i in (1, 2, 3)], space)
    pruned = create_trial(
        params={"lr": 0.5, "x": 0.5}, distributions=space, state=TrialState.PRUNED
    )
    study.add_trial(pruned)
    found = importances(study)
    assert found.untold == "told once 4 trials complete with a value; 3 have (1 pruned)"
    chart = importance_figure({m: () for m in METHODS}, METHODS, found.untold)
    (said,) = [a.text for a in chart.layout.annotations]
    assert (
        said.replace("<br>", " ") == "Told once 4 trials complete with a value; 3 have (1 pruned)"
    )
    # One knob: importances are shares among the knobs varied, so one knob's is all of it.
    one = made("maximize", [({"lr": 10.0**-i}, i / 10) for i in range(4)], {"lr": LOG_RATE})
    assert importances(one).knobs == ()
    assert importances(one).untold == (
        "not told: lr is the only knob varied, so it holds all the importance there is; "
        "its slice shows how it matters"
    )
    two = made("maximize", [({"lr": 10.0**-i, "x": i / 7}, i / 10) for i in range(4)], space)
    assert {k.name for k in importances(two).knobs} == {"lr", "x"}  # the control


# Figures -------------------------------------------------------------------------------


def test_optunas_figures_keep_what_optuna_computed_in_the_labs_look() -> None:
    study = sampled(lambda t: t.suggest_float("lr", 1e-4, 1.0, log=True) + t.suggest_float(
        "x", 0.0, 1.0), 12, direction="minimize")  # fmt: skip
    values = [t.value for t in study.trials]
    history = history_figure(study, "val_loss").to_plotly_json()
    best = next(t for t in history["data"] if t["name"] == "best so far")
    assert list(best["y"]) == list(np.minimum.accumulate(values))  # minimize: the lowest yet
    assert best["line"]["color"] == PALETTE[0]
    trials = next(t for t in history["data"] if t["name"] == "trial")
    assert list(trials["y"]) == values and trials["marker"]["color"] == PALETTE[1]
    assert history["layout"]["uirevision"] == "sweep/history"
    assert history["layout"]["title"]["text"] == "Optimization history: val_loss"

    contour = contour_figure(study, "lr", "x", "val_loss").to_plotly_json()
    assert contour["layout"]["xaxis"]["type"] == "log"  # lr was searched on a log scale
    assert contour["layout"]["yaxis"].get("type") != "log"
    assert contour["data"][0]["type"] == "contour" and contour["data"][0]["colorscale"]
    # Picked the other way round: Optuna draws its knobs by name, turned here.
    turned = contour_figure(study, "x", "lr", "val_loss")
    assert turned.layout.xaxis.title.text == "x" and turned.layout.yaxis.type == "log"
    straight = contour_figure(study, "lr", "x", "val_loss")
    assert np.array_equal(turned.data[0].z, np.array(straight.data[0].z).T, equal_nan=True)
    assert turned.data[1].x == straight.data[1].y
    with pytest.raises(ValueError):
        contour_figure(study, "lr", "momentum", "val_loss")

    for knob, axis in (("lr", "log"), ("x", None)):
        chart = slice_figure(study, knob, "val_loss").to_plotly_json()
        assert chart["layout"]["xaxis"].get("type") == axis
        assert len(chart["data"][0]["x"]) == 12

    (edf,) = edf_figure(study, "val_loss").data  # over a grid from the least value up
    assert edf.x[0] == min(values) and edf.y[-1] == 1 and edf.line.color == PALETTE[0]


def test_importance_bars_carry_their_interval_and_rank_the_first_methods_order() -> None:
    study = sampled(on_x, 16)
    found = {method: importances(study, method).knobs for method in METHODS}
    chart = importance_figure(found, METHODS).to_plotly_json()
    first, second = chart["data"]
    assert first["name"] == "PED-ANOVA" and second["name"] == "fANOVA"  # Optuna's default first
    assert list(first["y"])[-1] == "x"  # the top bar
    methods = {label: method for method, label in METHODS.items()}
    for bars in (first, second):
        by_name = {item.name: item for item in found[methods[bars["name"]]]}
        for name, value, plus, minus in zip(
            bars["y"],
            bars["x"],
            bars["error_x"]["array"],
            bars["error_x"]["arrayminus"],
            strict=True,
        ):
            item = by_name[name]
            expected = (item.value, item.high, item.low)
            assert (value, value + plus, value - minus) == pytest.approx(expected)


def test_a_study_without_completed_trials_says_so_without_asking_optuna(capfd) -> None:
    study = optuna.create_study()
    study.ask().report(0.7, 11)  # a trial that trains
    capfd.readouterr()
    for chart in (
        history_figure(study, "v"),
        edf_figure(study, "v"),
        contour_figure(study, "lr", "x", "v"),
        slice_figure(study, "lr", "v"),
    ):
        assert not chart.data and chart.layout.annotations[0].text == NO_TRIAL_YET
    for chart in (importance_figure({"fanova": []}, METHODS), learning_curve_figure([], "v")):
        assert chart.layout.annotations[0].text == NO_DATA["text"]
    # Optuna's plots logged "There are no complete trials" at every redraw of the page.
    assert capfd.readouterr().err == ""


def test_a_sweeps_first_trial_alone_draws_every_view() -> None:
    """While a sweep runs: one trial completed, the next reporting."""
    study = optuna.create_study()
    space = {"lr": LOG_RATE, "x": UNIT, "optimizer": CategoricalDistribution(["sgd", "adam"])}
    first = study.ask(space)
    first.report(0.5, 11)
    study.tell(first, 0.4)
    study.ask(space).report(0.7, 11)
    one = contour_figure(study, "lr", "x", "v")  # Optuna interpolates nothing from one
    assert not one.data and one.layout.annotations[0].text == NO_DATA["text"]
    for knob in space:
        assert len(slice_figure(study, knob, "v").data[0].x) == 1
    assert len(history_figure(study, "v").data[0].y) == 1
    assert edf_figure(study, "v").data[0].y[-1] == 1
    curves = learning_curves(study)
    assert [c.state for c in curves] == ["COMPLETE", "RUNNING"]
    assert len(learning_curve_figure(curves, "v").data) == 2
