"""`RunConfig`: validation lists every bad field; configs round-trip through JSON."""

from __future__ import annotations

import math

import pytest

from core.engine import RunConfig, fields
from core.knobs import InvalidInput
from core.optimizers import InvalidHyperparameters
from core.training.config import NOT_PRIVATE, instrument_intervals, warnings


def test_defaults_are_valid_and_round_trip() -> None:
    config = RunConfig()
    assert config.dataset == "mnist-5k" and config.model == "lenet"
    assert config.optimizer == "adamw" and config.hyperparameters["weight_decay"] == 0.004
    assert "telemetry" not in config.hyperparameters
    assert RunConfig.from_json(config.to_json()) == config
    rules = [{"pattern": "logits", "lr_mult": 2.0, "weight_decay": None}]
    with_rules = config.replace(hyperparameters={"layer_rules": rules})
    assert (
        RunConfig.from_dict(with_rules.to_dict()).to_dict()["hyperparameters"]["layer_rules"]
        == rules
    )


def test_every_bad_field_is_listed_at_once() -> None:
    with pytest.raises(InvalidHyperparameters) as caught:
        RunConfig.from_dict(
            {
                "dataset": "imagenet",
                "model": "resnet",
                "batch_size": 0,
                "epochs": math.nan,
                "seed": -1,
                "strategy": "tpu",
                "name": "bad\nname",
                "colour": "red",
                "optimizer": "sgd",
                "hyperparameters": {"learning_rate": -1, "radius": 0},
                "task_weights": {"digit": -1},
            }
        )
    assert set(caught.value.errors) == {
        "dataset",
        "model",
        "batch_size",
        "epochs",
        "seed",
        "strategy",
        "name",
        "colour",
        "learning_rate",
        "radius",
        "task_weights",
    }


def test_unknown_optimizer_and_foreign_knobs() -> None:
    with pytest.raises(InvalidHyperparameters, match="optimizer: must be one of"):
        RunConfig(optimizer="adamz")
    with pytest.raises(InvalidHyperparameters, match="beta_1: unknown hyperparameter for sgd"):
        RunConfig(optimizer="sgd", hyperparameters={"beta_1": 0.9})
    with pytest.raises(InvalidHyperparameters, match="telemetry: is a run field"):
        RunConfig(hyperparameters={"telemetry": True})


@pytest.mark.parametrize("text", ["{", "[1, 2]", '"x"'])
def test_malformed_json_is_refused(text: str) -> None:
    with pytest.raises(InvalidHyperparameters, match=r"^config: "):
        RunConfig.from_json(text)


def test_fields_offer_every_registered_optimizer() -> None:
    optimizer = next(f for f in fields() if f.name == "optimizer")
    assert {"sgd", "adamw", "projected_gd", "scaled_sign_gd"} <= set(optimizer.choices)
    assert all(f.help for f in fields())


def test_a_batch_larger_than_the_training_split_is_refused_naming_its_size() -> None:
    with pytest.raises(InvalidHyperparameters) as refused:
        RunConfig(dataset="digits", batch_size=1439)
    assert refused.value.errors == {
        "batch_size": "must be at most the training split of digits, 1,438 examples (got 1,439)"
    }
    assert RunConfig(dataset="digits", batch_size=1438).batch_size == 1438


@pytest.mark.parametrize("name", [[], {}, 3, None])
def test_an_optimizer_name_that_is_not_text_is_refused_naming_the_field(name) -> None:
    with pytest.raises(InvalidInput) as refused:
        RunConfig.from_dict({"optimizer": name})
    assert "optimizer" in refused.value.errors


DP = {"dataset": "digits", "dp_clip": 1.0, "dp_noise": 1.1, "dp_delta": 1e-5}


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"dp_clip": 0.0}, "dp_clip"),
        ({"dp_clip": -1.0}, "dp_clip"),
        ({"dp_clip": math.nan}, "dp_clip"),
        ({"dp_noise": -0.1}, "dp_noise"),
        ({"dp_delta": 0.0}, "dp_delta"),
        ({"dp_delta": 1.0}, "dp_delta"),
        ({"dp_epsilon_budget": 0.0}, "dp_epsilon_budget"),
        ({"dp_accountant": "moments"}, "dp_accountant"),
        ({"kind": "lr_find"}, "kind"),
        ({"precision": "mixed_float16"}, "precision"),
        ({"sharpness_every": 5}, "sharpness_every"),
        ({"noise_scale_every": 1}, "noise_scale_every"),
        ({"alpha_every": 2}, "alpha_every"),
    ],
)
def test_a_bad_private_run_is_refused_naming_the_field(changes: dict, field: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        RunConfig.from_dict({**DP, **changes})
    assert list(raised.value.errors) == [field]


def test_a_private_run_leaves_off_the_instruments_that_read_its_data() -> None:
    private = RunConfig.from_dict(DP)
    intervals = instrument_intervals(private, 1000)
    assert [name for name in NOT_PRIVATE if intervals[name]] == []
    assert intervals["histogram"] > 0  # of the private gradient: post-processing
    plain = instrument_intervals(RunConfig.from_dict({"dataset": "digits"}), 1000)
    assert all(plain[name] > 0 for name in NOT_PRIVATE)
    # Without dp_clip the other fields are inert, whatever they hold.
    RunConfig.from_dict({"dataset": "digits", "sharpness_every": 5, "dp_noise": 3.0})


def test_a_delta_of_at_least_one_over_n_is_warned_of_naming_n() -> None:
    assert warnings(RunConfig.from_dict(DP)) == []
    (warning,) = warnings(RunConfig.from_dict({**DP, "dp_delta": 1e-3}))
    n = RunConfig.from_dict(DP).dataset  # digits: its training split's size is said
    assert warning.startswith("dp_delta: 0.001 is not below 1/n = 1/1,438") and n in warning
    assert warnings(RunConfig.from_dict({"dataset": "digits", "dp_delta": 0.5})) == []


def test_a_knob_schedule_round_trips_and_is_checked_as_live_changes() -> None:
    schedule = [
        {"step": 5, "knobs": {"learning_rate": 0.05}},
        {"step": 9, "knobs": {"learning_rate": 0.02, "weight_decay": 0.5}},
    ]
    config = RunConfig.from_dict(
        {"optimizer": "sgd", "hyperparameters": {"weight_decay": 0.1}, "knob_schedule": schedule}
    )
    assert config.knob_schedule == schedule
    assert RunConfig.from_json(config.to_json()) == config
    assert RunConfig().knob_schedule == []


@pytest.mark.parametrize(
    ("schedule", "says"),
    [
        ({"step": 5}, "must be a list"),
        ([{"step": 0, "knobs": {"learning_rate": 0.1}}], "entry 1's step must be a whole number"),
        (
            [
                {"step": 5, "knobs": {"learning_rate": 0.1}},
                {"step": 5, "knobs": {"learning_rate": 0.2}},
            ],
            "entry 2's step must be a whole number above 5",
        ),
        ([{"step": 3, "knobs": {}}], "entry 1 must change at least one knob"),
        ([{"step": 3, "knobs": {"learning_rate": -1.0}}], "entry 1: learning_rate"),
        ([{"step": 3, "knobs": {"top_k": 3}}], "is not a live knob"),
        ([{"step": 3, "knobs": {"clip_norm": 1.0}}], "was off when training started"),
        ([{"step": 3, "knobs": {"learning_rate": 0.1}, "at": 1}], "entry 1 must be"),
    ],
)
def test_a_bad_knob_schedule_is_refused_naming_the_entry(schedule, says: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        RunConfig.from_dict({"optimizer": "sgd", "knob_schedule": schedule})
    assert says in caught.value.errors["knob_schedule"]
