"""A recipe probed (issue 52): at another seed, with knobs set on every arm, and its
negative control, a probe too. What a probe sets reaches every arm that has it; what it
sets wrong is named, and nothing starts."""

from __future__ import annotations

from typing import Any

import pytest

from core.knobs import InvalidInput
from core.recipes import RECIPES, Launch, clipping, projection, start
from core.recipes.probe import SEED_STRIDE, Probe
from core.recipes.runner import configs


class NoEngine:
    """An engine that fails a test if anything is started on it."""

    def start_all(self, configs: Any) -> list[str]:
        raise AssertionError("nothing may start")


@pytest.mark.parametrize("name", list(RECIPES))
def test_every_control_sets_what_it_names_on_every_arm_that_has_it(name) -> None:
    recipe = RECIPES[name]
    assert recipe.control.why.endswith(".") and recipe.control.overrides
    published, controlled = configs(recipe), configs(recipe, probe=recipe.control.probe())
    assert published.keys() == controlled.keys()
    for key, runs in controlled.items():
        for run, before in zip(runs, published[key], strict=True):
            for field, value in recipe.control.overrides.items():
                if field in run.hyperparameters:
                    assert run.hyperparameters[field] == value
                elif field in before.to_dict():
                    assert getattr(run, field) == value
            assert run.seed == before.seed  # the control is at the published seeds
    differs = [
        key for key in published if published[key][0].to_dict() != controlled[key][0].to_dict()
    ]
    assert differs  # the control changes some arm


def test_a_seed_moves_every_runs_seed_and_no_two_seeds_share_a_run() -> None:
    recipe = clipping.RECIPE
    seeds = {
        s: [run.seed for runs in configs(recipe, probe=Probe(s)).values() for run in runs]
        for s in (0, 1, 2)
    }
    assert seeds[0] == [0, 1, 2, 0, 1, 2]  # each arm's three repeats, as published
    assert seeds[2] == [s + 2 * SEED_STRIDE for s in seeds[0]]
    assert not set(seeds[0]) & set(seeds[1]) and not set(seeds[1]) & set(seeds[2])


def test_values_typed_as_text_are_read_as_their_knob_or_field() -> None:
    probe = Probe(0, {"radius": "1000", "batch_size": "128", "val_every": "none"})
    for runs in configs(projection.RECIPE, probe=probe).values():
        (run,) = runs
        assert run.hyperparameters["radius"] == 1000.0 and run.batch_size == 128
        assert run.val_every is None
    assert probe.text() == "radius = 1000, batch_size = 128, val_every = none on every arm"
    assert Probe(3).text() == "seed 3" and Probe().published and not Probe(1).published


@pytest.mark.parametrize(
    ("probe", "errors"),
    [
        (Probe(0, {"nope": "1"}), {"nope": "is neither a run field nor a knob"}),
        (Probe(0, {"radius": "-1"}), {"radius": "must be in (0, 1e+06]"}),
        (Probe(0, {"batch_size": "many"}), {"batch_size": "must be a number"}),
        (Probe(0, {"optimizer": "adam"}), {"optimizer": "a probe may not set it"}),
        (Probe(-1), {"seed": "must be a whole number ≥ 0"}),
    ],
)
def test_a_bad_probe_is_named_and_nothing_starts(probe, errors) -> None:
    with pytest.raises(InvalidInput) as raised:
        start(projection.RECIPE, NoEngine(), probe=probe)  # type: ignore[arg-type]
    assert raised.value.errors.keys() == errors.keys()
    for field, reason in errors.items():
        assert reason in raised.value.errors[field]


def test_a_launch_keeps_its_probe_as_plain_data() -> None:
    launch = Launch("projection", {"r = 10": ["a"]}, Probe(2, {"radius": 1000.0}))
    assert Launch.from_dict(launch.to_dict()) == launch
    assert Launch.from_dict({"recipe": "x", "run_ids": {}}).probe == Probe()
