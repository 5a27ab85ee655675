"""Serialization, save/load continuation and live knobs."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from core import optimizers
from core.optimizers import InvalidHyperparameters
from tests.optimizer_fixtures import GlobalHeavyBall, compile_model, small_data, small_model

FULL = {
    "learning_rate": 0.05,
    "clip_norm": 0.5,
    "radius": 4.0,
    "weight_decay": 0.1,
    "l2": 0.01,
    "noise_std": 0.01,
    "top_k": 0.5,
    "top_k_error_feedback": True,
    "prune_threshold": 1e-3,
    "layer_rules": [{"pattern": "logits", "lr_mult": 2.0, "weight_decay": 0.3}],
    "telemetry": True,
}
MAKERS = {
    "adamw_all_knobs": lambda: optimizers.build("adamw", **FULL),
    "momentum_all_knobs": lambda: optimizers.build("momentum", nesterov=True, **FULL),
    "global_vector": lambda: GlobalHeavyBall(learning_rate=0.05, radius=4.0, noise_std=0.01),
}


@pytest.mark.parametrize("spec", optimizers.specs(), ids=lambda s: s.name)
def test_config_round_trip(spec) -> None:
    optimizer = spec.build(**{k: v for k, v in FULL.items() if k != "learning_rate"})
    config = optimizer.get_config()
    clone = type(optimizer).from_config(config)
    assert clone.get_config() == config
    assert config["radius"] == 4.0 and config["weight_decay"] == 0.1  # no float32 noise
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert type(restored) is type(optimizer) and restored.get_config() == config


def train(model: keras.Model, epochs: int) -> None:
    x, y = small_data()
    model.fit(x, y, batch_size=32, epochs=epochs, shuffle=False, verbose=0)


@pytest.mark.parametrize("case", MAKERS)
def test_saved_model_continues_training_identically(case: str, tmp_path) -> None:
    model = compile_model(small_model(), MAKERS[case]())
    train(model, 2)
    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras")
    assert type(loaded.optimizer) is type(model.optimizer)
    assert loaded.optimizer.iterations.numpy() == 8
    for before, after in zip(model.optimizer.variables, loaded.optimizer.variables, strict=True):
        np.testing.assert_array_equal(after.numpy(), before.numpy())
    train(model, 2)
    train(loaded, 2)
    for a, b in zip(model.get_weights(), loaded.get_weights(), strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)


def test_checkpoint_restores_and_continues(tmp_path) -> None:
    model = compile_model(small_model(), MAKERS["adamw_all_knobs"]())
    train(model, 2)
    path = tf.train.Checkpoint(model=model, optimizer=model.optimizer).save(str(tmp_path / "ckpt"))
    other = compile_model(small_model(seed=5), MAKERS["adamw_all_knobs"]())
    other.optimizer.build(other.trainable_variables)
    tf.train.Checkpoint(model=other, optimizer=other.optimizer).restore(path).assert_consumed()
    train(model, 1)
    train(other, 1)
    for a, b in zip(model.get_weights(), other.get_weights(), strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)


def test_live_knobs_change_the_next_step_without_retracing() -> None:
    variable = keras.Variable(np.full((10,), 3.0, np.float32))
    optimizer = optimizers.build("sgd", learning_rate=0.1, radius=100.0, clip_norm=100.0)
    optimizer.build([variable])

    @tf.function
    def step(grad: tf.Tensor) -> None:
        optimizer.apply([grad], [variable])

    step(tf.ones(10))
    np.testing.assert_allclose(variable.numpy(), 2.9, rtol=1e-6)
    assert optimizer.set_knob("radius", 1.0) == 1.0
    step(tf.ones(10))
    assert np.linalg.norm(variable.numpy()) == pytest.approx(1.0, rel=1e-6)
    optimizer.set_knob("radius", 100.0)
    optimizer.set_knob("learning_rate", 1.0)
    optimizer.set_knob("clip_norm", np.sqrt(10) / 10)  # clips ‖1‖ = √10 down to 0.1·√10
    before = variable.numpy().copy()
    step(tf.ones(10))
    np.testing.assert_allclose(before - variable.numpy(), 0.1, rtol=1e-5)
    assert step.experimental_get_tracing_count() == 1
    assert optimizer.get_config()["radius"] == 100.0
    assert optimizer.get_knob("learning_rate") == 1.0


def test_live_knob_errors_name_the_field() -> None:
    optimizer = optimizers.build("adam", radius=1.0)
    with pytest.raises(InvalidHyperparameters, match=r"^radius: must be in"):
        optimizer.set_knob("radius", -1.0)
    with pytest.raises(InvalidHyperparameters, match=r"^radius: cannot be turned off"):
        optimizer.set_knob("radius", None)
    with pytest.raises(InvalidHyperparameters, match=r"^clip_norm: was off"):
        optimizer.set_knob("clip_norm", 1.0)
    with pytest.raises(InvalidHyperparameters, match=r"^beta_1: is not a live knob"):
        optimizer.set_knob("beta_1", 0.5)
    assert optimizer.get_knob("radius") == 1.0
