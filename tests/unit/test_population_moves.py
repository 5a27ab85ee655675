"""Population-based training's moves and plan (`core.population`): who exploits whom, how
knobs are explored, and what a plan refuses, naming the field."""

from __future__ import annotations

import numpy as np
import pytest

from core.engine import RunConfig
from core.knobs import InvalidInput
from core.population import PopulationPlan
from core.population.exploit_explore import exploits, explore, quantile_size, ranked, sample
from core.population.plan import MAX_EPOCHS
from core.sweep import Dimension, SearchSpace

CONFIG = RunConfig(dataset="digits", model="mlp", optimizer="sgd", seed=5)
LR = SearchSpace((Dimension("learning_rate", 1e-3, 1.0, log=True),))


def plan(**changes) -> PopulationPlan:
    settings = {"population": 4, "interval": 10, "generations": 3, "seed": 1} | changes
    return PopulationPlan.create(CONFIG, LR, **settings)


def knobs_of(rates):
    return {m: {"learning_rate": rate} for m, rate in enumerate(rates)}


def test_ranking_puts_the_best_first_and_leaves_out_the_failed() -> None:
    scores = {0: 0.5, 1: None, 2: 0.9, 3: float("nan"), 4: 0.5}
    assert ranked(scores, maximize=True) == [2, 0, 4]
    assert ranked(scores, maximize=False) == [0, 4, 2]


@pytest.mark.parametrize(
    ("members", "quantile", "size"), [(4, 0.25, 1), (8, 0.25, 2), (5, 0.5, 2), (2, 0.5, 1)]
)
def test_each_end_holds_the_quantile_rounded_up_at_most_half(members, quantile, size) -> None:
    assert quantile_size(members, quantile) == size


def test_the_bottom_quantile_copies_the_top_and_the_middle_trains_on() -> None:
    axes = plan().axes
    scores = {0: 0.2, 1: 0.9, 2: 0.5, 3: 0.6, 4: 0.95, 5: 0.1, 6: 0.7, 7: 0.3}
    rng = np.random.default_rng(0)
    moves = exploits(
        scores,
        knobs_of([0.01 * (m + 1) for m in range(8)]),
        axes,
        rng,
        maximize=True,
        quantile=0.25,
        perturb=(0.8, 1.2),
        resample=0.0,
    )
    assert sorted(move.member for move in moves) == [0, 5]  # the two worst
    for move in moves:
        assert move.source in (1, 4)  # the two best
        copied = 0.01 * (move.source + 1)
        assert move.knobs["learning_rate"] == pytest.approx(copied * 0.8) or move.knobs[
            "learning_rate"
        ] == pytest.approx(copied * 1.2)


def test_a_failed_member_is_replaced_beyond_the_quantile() -> None:
    moves = exploits(
        {0: 0.9, 1: None, 2: 0.5, 3: 0.6},
        knobs_of([0.1, 0.2, 0.3, 0.4]),
        plan().axes,
        np.random.default_rng(0),
        maximize=True,
        quantile=0.25,
        perturb=(1.0,),
        resample=0.0,
    )
    assert [(move.member, move.source) for move in moves] == [(1, 0), (2, 0)]
    assert all(move.knobs == {"learning_rate": 0.1} for move in moves)


def test_nobody_to_copy_when_every_member_failed() -> None:
    rng = np.random.default_rng(0)
    moves = exploits(
        {0: None, 1: None},
        knobs_of([0.1, 0.2]),
        plan().axes,
        rng,
        maximize=True,
        quantile=0.25,
        perturb=(0.8, 1.2),
        resample=0.0,
    )
    assert moves == []


def test_exploring_stays_within_the_range_and_resamples_at_its_rate() -> None:
    (axis,) = plan().axes
    rng = np.random.default_rng(3)
    near_top = [explore({"learning_rate": 0.95}, [axis], rng, (1.2,), 0.0) for _ in range(5)]
    assert all(k["learning_rate"] == 1.0 for k in near_top)  # 1.14 kept at the high end
    drawn = [explore({"learning_rate": 0.5}, [axis], rng, (1.0,), 1.0) for _ in range(200)]
    values = np.array([k["learning_rate"] for k in drawn])
    assert ((values >= 1e-3) & (values <= 1.0)).all()
    # Log-uniform over three decades: about a third in each.
    assert 0.2 < np.mean(values < 1e-2) < 0.45 and 0.2 < np.mean(values > 1e-1) < 0.45
    kept = [explore({"learning_rate": 0.5}, [axis], rng, (1.0,), 0.0) for _ in range(20)]
    assert all(k["learning_rate"] == 0.5 for k in kept)


def test_the_same_seed_makes_the_same_moves() -> None:
    (axis,) = plan().axes

    def draws(seed: int) -> list[float]:
        rng = np.random.default_rng(seed)
        return [sample(axis, rng) for _ in range(5)]

    assert draws(7) == draws(7) and draws(7) != draws(8)


def test_a_member_validates_and_saves_at_every_interval_end() -> None:
    population = plan(interval=25, generations=4)
    member = population.member_config(2, {"learning_rate": 0.05}, "p")
    assert (member.max_steps, member.val_every, member.checkpoint_every) == (100, 25, 25)
    assert member.hyperparameters["learning_rate"] == 0.05 and member.seed == 7
    assert member.epochs == MAX_EPOCHS  # max_steps alone ends it, however small the data
    assert list(population.boundaries) == [25, 50, 75]
    assert population.objective.metric == "val_accuracy"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"population": 1}, "population"),
        ({"population": 33}, "population"),
        ({"interval": 0}, "interval"),
        ({"generations": 1}, "generations"),
        ({"quantile": 0.0}, "quantile"),
        ({"quantile": 0.75}, "quantile"),
        ({"perturb": (0.8, -1.0)}, "perturb"),
        ({"resample": 1.5}, "resample"),
        ({"resample": float("nan")}, "resample"),
        ({"seed": -1}, "seed"),
        ({"objective": "time_to_target"}, "objective"),
        ({"objective": "val_mae"}, "objective"),
    ],
)
def test_a_bad_plan_is_refused_naming_the_field(changes, field) -> None:
    with pytest.raises(InvalidInput) as refused:
        plan(**changes)
    assert field in refused.value.errors


@pytest.mark.parametrize(
    ("space", "field"),
    [
        (SearchSpace((Dimension("batch_size", 16, 64),)), "batch_size"),  # a run field
        (SearchSpace((Dimension("momentum", choices=(0.0, 0.9)),)), "momentum"),  # choices
        (SearchSpace((Dimension("warp", 0.1, 1.0),)), "warp"),  # no such knob
    ],
)
def test_only_live_number_knobs_can_be_searched(space, field) -> None:
    with pytest.raises(InvalidInput) as refused:
        PopulationPlan.create(CONFIG, space, population=4, interval=10, generations=3)
    assert field in refused.value.errors
