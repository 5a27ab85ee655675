"""Where Keras's own optimizers set the expectation, ours meet it: what running Keras's
optimizer tests against ours found (weight-decay exclusions, sparse gradients, schedules
and callables as learning rates, AdamW's decay and name)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from core import optimizers
from core.knobs import InvalidInput


def variables() -> list[keras.Variable]:
    return [
        keras.Variable(np.linspace(-1.0, 1.0, 6).reshape(2, 3).astype("float32"), name="kernel"),
        keras.Variable(np.array([0.5, -0.5, 2.0], "float32"), name="bias"),
    ]


GRADIENTS = [np.full((2, 3), 0.3, "float32"), np.array([0.1, -0.2, 0.3], "float32")]


def test_exclude_from_weight_decay_works_as_in_keras_adamw() -> None:
    ours, theirs = variables(), variables()
    mine = optimizers.build("adamw", learning_rate=0.1, weight_decay=0.5)
    keras_adamw = keras.optimizers.AdamW(learning_rate=0.1, weight_decay=0.5)
    for optimizer in (mine, keras_adamw):
        optimizer.exclude_from_weight_decay(var_names=["bias"])
    for _ in range(3):
        mine.apply_gradients(zip(GRADIENTS, ours, strict=True))
        keras_adamw.apply_gradients(zip(GRADIENTS, theirs, strict=True))
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)
    # Without the exclusion the bias decays too: the exclusion changed something.
    decayed = variables()
    plain = optimizers.build("adamw", learning_rate=0.1, weight_decay=0.5)
    for _ in range(3):
        plain.apply_gradients(zip(GRADIENTS, decayed, strict=True))
    assert not np.allclose(decayed[1].numpy(), ours[1].numpy())


def test_a_layer_rule_decay_still_applies_to_an_excluded_variable() -> None:
    rule = {"pattern": "bias", "lr_mult": 1.0, "weight_decay": 0.5}
    kept, excluded = variables(), variables()
    for target, exclude in ((kept, False), (excluded, True)):
        optimizer = optimizers.build("sgd", learning_rate=0.1, layer_rules=[rule])
        if exclude:
            optimizer.exclude_from_weight_decay(var_names=["bias"])
        optimizer.apply_gradients(zip(GRADIENTS, target, strict=True))
    np.testing.assert_array_equal(kept[1].numpy(), excluded[1].numpy())


@pytest.mark.parametrize(
    "knobs", [{"top_k": 0.5}, {"noise_std": 0.1}, {"clip_norm": 0.1}, {"radius": 2.0}]
)
def test_a_sparse_gradient_with_a_tuple_shape_steps_as_its_dense_self(knobs) -> None:
    sparse = tf.IndexedSlices(
        tf.constant([[1.0, 2.0, 3.0], [0.5, 0.5, 0.5], [1.0, 1.0, 1.0]]),
        tf.constant([0, 2, 0]),  # row 0 twice: the rows add up
        dense_shape=(4, 3),
    )
    dense = tf.convert_to_tensor(
        [[2.0, 3.0, 4.0], [0.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.0, 0.0, 0.0]]
    )
    results = []
    for gradient in (sparse, dense):
        variable = keras.Variable(np.ones((4, 3), "float32"))
        optimizers.build("sgd", learning_rate=0.1, **knobs).apply_gradients([(gradient, variable)])
        results.append(variable.numpy())
    np.testing.assert_allclose(*results, rtol=1e-6)


def test_build_takes_a_schedule_or_a_callable_as_the_learning_rate() -> None:
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=1, decay_rate=0.5)
    for learning_rate, expected in ((schedule, [0.1, 0.05, 0.025]), (lambda: 0.2, [0.2] * 3)):
        optimizer = optimizers.build("momentum", learning_rate=learning_rate, momentum=0.0)
        variable = keras.Variable(np.zeros(1, "float32"))
        for rate in expected:
            before = variable.numpy()
            optimizer.apply_gradients([(np.ones(1, "float32"), variable)])
            np.testing.assert_allclose(before - variable.numpy(), [rate], rtol=1e-6)
        assert "learning_rate" not in optimizer.live_variables  # not a live knob then


def test_adamw_needs_its_weight_decay_as_keras_adamw_does() -> None:
    with pytest.raises(InvalidInput, match="weight_decay: is required by adamw"):
        optimizers.build("adamw", weight_decay=None)
    with pytest.raises(ValueError, match="weight_decay"):
        keras.optimizers.AdamW(weight_decay=None)
    assert optimizers.build("adam", weight_decay=None).get_knob("weight_decay") is None


def test_an_optimizer_is_named_after_its_spec_as_keras_names_its_own() -> None:
    assert keras.optimizers.AdamW().name.startswith("adam_w")  # Keras's, from the class
    first, second = optimizers.build("adamw").name, optimizers.build("adamw").name
    assert first.startswith("adam_w") and second.startswith("adam_w_") and first != second
    assert optimizers.build("momentum").name.startswith("momentum")  # not Keras's: as is
    assert optimizers.build("projected_gd").name.startswith("projected_gd")
    assert optimizers.build("adamw", name="mine").name == "mine"
