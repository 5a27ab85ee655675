"""`core.sweep.analysis.importances` against Optuna's own `get_param_importances` on the
same studies, built with `optuna.trial.create_trial` so that nothing trains: the values
are Optuna's (its default evaluator, and fANOVA with the same seed), a knob without
effect ranks last near 0, and tiny studies (duplicate trials, one score for all) are
told or said why, never raised."""

from __future__ import annotations

import io
import math
from collections.abc import Callable

import numpy as np
import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import create_trial

from core.cli.sweeping import print_importances
from core.sweep.analysis import DEFAULT, METHODS, RESAMPLES, importances, summary_lines
from core.sweep.analysis.importance import SEED

optuna.logging.set_verbosity(optuna.logging.WARNING)
SPACE = {
    "learning_rate": FloatDistribution(1e-4, 1.0, log=True),
    "weight_decay": FloatDistribution(0.0, 0.1),
    "optimizer": CategoricalDistribution(["sgd", "adam"]),
}


def built(value: Callable[[dict], float], n: int, seed: int = 0) -> optuna.Study:
    """A study of `n` completed trials at random settings of `SPACE`, valued by `value`."""
    rng = np.random.default_rng(seed)
    study = optuna.create_study(direction="maximize")
    for _ in range(n):
        params = {
            "learning_rate": float(10 ** rng.uniform(-4, 0)),
            "weight_decay": float(rng.uniform(0, 0.1)),
            "optimizer": str(rng.choice(["sgd", "adam"])),
        }
        study.add_trial(create_trial(params=params, distributions=SPACE, value=value(params)))
    return study


def on_rate(params: dict) -> float:
    """Depends on the learning rate alone (a peak at 0.01)."""
    return -abs(math.log10(params["learning_rate"]) + 2)


def mostly_decay(params: dict) -> float:
    """Weight decay much, the learning rate a little, the optimizer not at all."""
    return 10 * params["weight_decay"] + 0.1 * math.log10(params["learning_rate"])


def optunas(study: optuna.Study, method: str) -> dict[str, float]:
    """What Optuna says: its default evaluator (no `evaluator` given), or fANOVA seeded."""
    if method == DEFAULT:
        return optuna.importance.get_param_importances(study)
    evaluator = optuna.importance.FanovaImportanceEvaluator(seed=SEED)
    return optuna.importance.get_param_importances(study, evaluator=evaluator)


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize(("value", "n"), [(on_rate, 12), (mostly_decay, 30)])
def test_each_importance_is_optunas_own_on_the_same_study(method, value, n) -> None:
    study = built(value, n)
    found = importances(study, method)
    expected = optunas(study, method)
    assert [k.name for k in found.knobs] == list(expected)  # ranked alike
    assert {k.name: k.value for k in found.knobs} == {k: float(v) for k, v in expected.items()}
    assert all(k.low <= k.value <= k.high for k in found.knobs)  # type: ignore[operator]
    # The resamples make the interval, not the point.
    alone = importances(study, method, resamples=0)
    assert [(k.name, k.value) for k in alone.knobs] == [(k.name, k.value) for k in found.knobs]
    label = "PED-ANOVA, Optuna's default evaluator" if method == DEFAULT else "fANOVA with seed 0"
    assert (
        found.describe() == f"{label}, on all {n} trials; 90% intervals over 16 bootstrap resamples"
    )


@pytest.mark.parametrize("method", list(METHODS))
def test_a_knob_without_effect_ranks_last_near_zero(method) -> None:
    """The negative control: the optimizer changes nothing, and both say so."""
    found = importances(built(mostly_decay, 60), method).knobs
    assert [k.name for k in found] == ["weight_decay", "learning_rate", "optimizer"], found
    assert found[-1].value < 0.02 and found[-1].low < 0.02, found  # type: ignore[operator]
    assert found[0].low > found[-1].high, found  # type: ignore[operator]


@pytest.mark.slow  # 50 studies, each with its bootstrap: about 10 s
def test_fifty_four_trial_studies_are_told_or_say_why_and_never_raise() -> None:
    """Tiny sweeps as they come: settings drawn twice, scores tied or all the same. fANOVA
    refuses a resample without variance ("zero total variance in all trees"), which once
    ended a finished sweep with exit 1."""
    rng = np.random.default_rng(52)
    rates, decays, scores = [1e-3, 1e-2, 1e-1], [0.0, 0.01], [0.1, 0.1, 0.5, 0.9]
    space = {name: SPACE[name] for name in ("learning_rate", "weight_decay")}
    seen = {"told": 0, "untold": 0, "skipped": 0}
    for k in range(50):
        study = optuna.create_study(direction="maximize")
        trials = [
            create_trial(
                params={
                    "learning_rate": float(rng.choice(rates)),
                    "weight_decay": float(rng.choice(decays)),
                },
                distributions=space,
                value=0.5 if k % 5 == 0 else float(rng.choice(scores)),
            )
            for _ in range(3)
        ]
        study.add_trials([*trials, trials[int(rng.integers(3))]])  # one trial twice
        for method in METHODS:
            found = importances(study, method)
            assert found.resamples == RESAMPLES and 0 <= found.skipped <= RESAMPLES
            if found.knobs:
                expected = optunas(study, method)
                assert {i.name: i.value for i in found.knobs} == expected  # to the last digit
                seen["told"] += 1
                seen["skipped"] += found.skipped > 0
            else:
                assert found.untold is not None and found.untold.startswith("not told: ")
                seen["untold"] += 1
    assert all(seen.values()), seen  # each case came up


@pytest.mark.parametrize("method", list(METHODS))
def test_a_resample_without_variance_is_skipped_and_counted(method) -> None:
    """Three trials of four scored alike: a resample without the fourth has no variance.
    (Two knobs: with one, no importance is told at all.)"""
    values = [0.1, 0.1, 0.1, 0.9]
    study = optuna.create_study(direction="maximize")
    knobs = {name: SPACE[name] for name in ("learning_rate", "weight_decay")}
    for rate, value in zip([1e-3, 1e-2, 3e-2, 1e-1], values, strict=True):
        study.add_trial(
            create_trial(
                params={"learning_rate": rate, "weight_decay": rate / 2},
                distributions=knobs,
                value=value,
            )
        )
    rng = np.random.default_rng(SEED)  # the resamples' draws, as `importances` makes them
    flat = sum(3 not in rng.integers(4, size=4) for _ in range(RESAMPLES))
    assert 0 < flat < RESAMPLES
    found = importances(study, method)
    assert found.skipped == flat
    was = "was" if flat == 1 else "were"
    assert found.describe().endswith(
        f"over 16 bootstrap resamples; {flat} of 16 had no variance and {was} skipped"
    )


def test_a_study_whose_trials_all_scored_the_same_says_so(capsys) -> None:
    study = built(lambda params: 0.1, 6)
    for method in METHODS:
        found = importances(study, method)
        assert found.knobs == () and found.untold == "not told: all 6 trials scored the same (0.1)"
    assert summary_lines(study, found)[1] == (
        "Which knobs matter is not told: all 6 trials scored the same (0.1)."
    )
    out = io.StringIO()
    print_importances(found, out)
    assert out.getvalue() == ""
    assert capsys.readouterr().err == "importance: not told: all 6 trials scored the same (0.1)\n"
    one_setting = optuna.create_study()
    decay = {"weight_decay": SPACE["weight_decay"]}
    for value in (0.1, 0.2, 0.3, 0.4):  # one setting, scored four ways (noise, say)
        one_setting.add_trial(
            create_trial(params={"weight_decay": 0.01}, distributions=decay, value=value)
        )
    assert importances(one_setting).untold == "not told: no knob took two values over the 4 trials"
