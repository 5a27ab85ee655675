"""Repeats: the seeds of each copy, their group, and a group's mean and band."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.engine import RunConfig
from core.engine.repeats import group_label, groups, repeat_configs, whole_groups
from core.group_comparison import mean_band, mean_interval, value_at
from core.knobs import InvalidInput
from core.store import Metrics
from core.sweep import settings, varying


@pytest.mark.parametrize(
    ("vary", "seeds", "batch_seeds"),
    [
        ("both", [7, 8, 9], [7, 8, 9]),
        ("init", [7, 8, 9], [7, 7, 7]),
        ("data", [7, 7, 7], [7, 8, 9]),
    ],
)
def test_each_repeat_varies_what_it_should(vary, seeds, batch_seeds) -> None:
    configs = repeat_configs(RunConfig(seed=7, optimizer="sgd"), 3, vary)
    assert [c.seed for c in configs] == seeds
    assert [c.batch_seed for c in configs] == batch_seeds
    assert len({c.group for c in configs}) == 1 and configs[0].group.startswith("g-")
    assert {c.optimizer for c in configs} == {"sgd"}
    assert configs[0].name == f"sgd · lenet · mnist-5k · {'data' if vary == 'data' else 'seed'} 7"


def test_two_groups_differ_and_one_repeat_is_the_config_itself() -> None:
    config = RunConfig()
    assert repeat_configs(config, 2)[0].group != repeat_configs(config, 2)[0].group
    assert repeat_configs(config, 1) == [config]


@pytest.mark.parametrize(
    ("repeats", "vary", "field"),
    [(0, "both", "repeats"), (101, "both", "repeats"), (2, "seeds", "vary")],
)
def test_bad_repeats_are_refused_by_name(repeats, vary, field) -> None:
    with pytest.raises(InvalidInput) as caught:
        repeat_configs(RunConfig(), repeats, vary)
    assert set(caught.value.errors) == {field}


class Run:  # what `groups` reads of a RunStatus
    def __init__(self, name: str, group: str | None) -> None:
        self.id, self.name, self.config = name, name, {"group": group}


def test_groups_gather_their_runs_and_are_named_without_the_seed() -> None:
    runs = [
        Run("a · seed 0", "g-1"),
        Run("solo", None),
        Run("a · seed 1", "g-1"),
        Run("b · data 3", "g-2"),
    ]
    found = groups(runs)
    assert {k: [r.name for r in v] for k, v in found.items()} == {
        "g-1": ["a · seed 0", "a · seed 1"],
        "g-2": ["b · data 3"],
    }
    assert group_label(found["g-1"]) == "a" and group_label(found["g-2"]) == "b"


def metrics(steps: list[int], values: list[float]) -> Metrics:
    return Metrics(np.array(steps), {"loss": np.array(values, float)})


def test_a_groups_band_is_the_t_interval_of_the_mean_at_common_steps() -> None:
    runs = [metrics([1, 2, 3], [1.0, 2.0, 3.0]), metrics([1, 2, 3], [3.0, 2.0, math.nan])]
    steps, mean, margin = mean_band(runs, "loss")
    assert steps.tolist() == [1, 2]  # step 3 was not logged by every run
    assert mean.tolist() == [2.0, 2.0]
    assert margin[0] == pytest.approx(12.706 * math.sqrt(2) / math.sqrt(2), rel=1e-3)
    assert margin[1] == 0.0
    assert mean_interval([1.0, 3.0]) == (2.0, pytest.approx(12.706, rel=1e-3))
    assert mean_interval([5.0]) == (5.0, None)


def test_value_at_takes_the_last_value_logged_up_to_the_step() -> None:
    m = metrics([10, 20, 30], [3.0, math.nan, 1.0])
    assert value_at(m, "loss", 25) == 3.0 and value_at(m, "loss") == 1.0
    assert math.isnan(value_at(m, "loss", 5)) and math.isnan(value_at(m, "accuracy"))


def test_the_group_labels_runs_and_is_not_a_setting_compare_sets_apart() -> None:
    first, second = (repeat_configs(RunConfig(), 2)[0] for _ in range(2))
    assert first.group != second.group
    rows = [settings(first.to_dict()), settings(second.to_dict())]
    assert "group" not in rows[0] and varying(rows) == []


def test_runs_handed_over_are_the_groups_they_hold_whole_and_the_runs_left() -> None:
    found = groups(
        [Run("a0", "g-a"), Run("b0", "g-b"), Run("a1", "g-a"), Run("b1", "g-b"), Run("c", None)]
    )
    assert whole_groups(["c", "b1", "a0", "b0", "a1", "c"], found) == (["g-a", "g-b"], ["c"])
    assert whole_groups(["a0", "b0", "b1"], found) == (["g-b"], ["a0"])  # half a group: runs
    assert whole_groups([], found) == ([], [])
