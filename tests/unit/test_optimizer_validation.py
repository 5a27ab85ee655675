"""Bad hyperparameters are refused with the field named; every spec is complete."""

from __future__ import annotations

import math

import pytest

from core import optimizers
from core.optimizers import InvalidHyperparameters

BAD_VALUES = [
    ("learning_rate", -1.0),
    ("learning_rate", 0.0),
    ("learning_rate", math.nan),
    ("learning_rate", math.inf),
    ("learning_rate", 1e9),
    ("learning_rate", "0.1"),
    ("learning_rate", True),
    ("learning_rate", None),
    ("radius", 0.0),
    ("radius", -2.0),
    ("radius", math.nan),
    ("clip_norm", 0.0),
    ("clip_norm", -math.inf),
    ("top_k", 0.0),
    ("top_k", 1.5),
    ("top_k_error_feedback", "yes"),
    ("weight_decay", -0.1),
    ("noise_std", -1.0),
    ("noise_seed", 1.5),
    ("noise_seed", -1),
    ("prune_threshold", -1e-3),
    ("layer_rules", "body"),
    ("layer_rules", [{"pattern": "("}]),
    ("layer_rules", [{"pattern": "x", "lr_mult": -1}]),
    ("layer_rules", [{"pattern": "x", "weight_decay": math.nan}]),
    ("layer_rules", [{"patern": "x"}]),
    ("telemetry", 1),
]


@pytest.mark.parametrize(("field", "value"), BAD_VALUES)
@pytest.mark.parametrize("name", ["sgd", "adamw", "projected_gd"])
def test_bad_value_is_refused_naming_the_field(name: str, field: str, value: object) -> None:
    with pytest.raises(InvalidHyperparameters) as caught:
        optimizers.build(name, **{field: value})
    assert set(caught.value.errors) == {field}
    assert str(caught.value).startswith(f"{field}: ")


@pytest.mark.parametrize(
    ("name", "field", "value"),
    [
        ("momentum", "momentum", 1.0),
        ("momentum", "nesterov", 1),
        ("adam", "beta_1", 1.0),
        ("adam", "beta_2", -0.1),
        ("adam", "epsilon", 0.0),
        ("adam", "epsilon_inside_sqrt", "no"),
    ],
)
def test_bad_algorithm_knob_is_refused(name: str, field: str, value: object) -> None:
    with pytest.raises(InvalidHyperparameters, match=rf"^{field}: "):
        optimizers.build(name, **{field: value})


def test_every_bad_field_is_listed_at_once() -> None:
    with pytest.raises(InvalidHyperparameters) as caught:
        optimizers.build("adam", learning_rate=-1, radius=0, top_k=2, nonsense=1)
    assert set(caught.value.errors) == {"learning_rate", "radius", "top_k", "nonsense"}
    assert "unknown hyperparameter for adam" in caught.value.errors["nonsense"]


def test_a_knob_of_another_optimizer_is_unknown() -> None:
    with pytest.raises(InvalidHyperparameters, match=r"^beta_1: unknown hyperparameter for sgd"):
        optimizers.build("sgd", beta_1=0.9)


def test_unknown_optimizer_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidHyperparameters, match=r"^optimizer: unknown optimizer 'adamz'"):
        optimizers.build("adamz")


def test_projected_gd_requires_a_radius() -> None:
    with pytest.raises(InvalidHyperparameters, match=r"^radius: is required by projected_gd"):
        optimizers.build("projected_gd", radius=None)


def test_classes_validate_when_made_directly() -> None:
    with pytest.raises(InvalidHyperparameters, match=r"^learning_rate: "):
        optimizers.Adam(learning_rate=-0.1)
    with pytest.raises(ValueError, match=r"^radius: "):
        optimizers.SGD(radius=0)


def test_numbers_are_normalized() -> None:
    optimizer = optimizers.build("sgd", learning_rate=1, noise_seed=3.0, radius=2)
    assert optimizer.get_knob("learning_rate") == 1.0
    assert optimizer.get_knob("noise_seed") == 3
    assert optimizer.get_knob("radius") == 2.0


def test_specs_describe_every_optimizer_and_knob() -> None:
    names = [spec.name for spec in optimizers.specs()]
    for name in ("sgd", "momentum", "adam", "adamw", "clipped_adam", "projected_gd"):
        assert name in names
    for spec in optimizers.specs():
        described = spec.describe()
        assert described["summary"] and described["update_rule"]
        knob_names = [k["name"] for k in described["knobs"]]
        assert len(knob_names) == len(set(knob_names))
        for knob in described["knobs"]:
            assert knob["help"] and knob["type"] in {"float", "int", "bool", "rules"}
            if knob["type"] in {"float", "int"}:
                assert knob["range"], knob["name"]
        spec.build()  # every default is valid
    adamw = optimizers.get_spec("adamw")
    assert {k.name: k.default for k in adamw.knobs}["weight_decay"] == 0.004
    required = {
        k["name"] for k in optimizers.get_spec("projected_gd").describe()["knobs"] if k["required"]
    }
    assert required == {"radius"}
