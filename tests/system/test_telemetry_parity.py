"""The per-layer statistics, measured in a few ops for any number of variables (same-shape
variables stacked: `core.optimizers.transforms.per_tensor`), agree with the per-variable
ops they replaced and with a float64 NumPy reference, on LeNet and on a plugin model."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from core import models, optimizers
from core.engine import RunConfig
from core.optimizers import keras_internals, transforms
from core.training.instruments import INSTRUMENTS
from core.training.strategies import make_strategy
from core.training.telemetry import ZERO, LayerStatistics, layer_of
from core.training.trainer import Trainer

INSTRUMENTS_OFF = {f"{name}_every": 0 for name in INSTRUMENTS}
STEPS = 3


def per_variable(before: list[tf.Tensor], after: list[tf.Tensor], initial: list[tf.Tensor]):
    """The statistics of each variable as the lab measured them before, one op chain per
    variable (float32)."""
    step_sq = [2.0 * tf.nn.l2_loss(a - b) for a, b in zip(after, before, strict=True)]
    param_sq = [2.0 * tf.nn.l2_loss(a) for a in after]
    zeros = [tf.reduce_sum(tf.cast(tf.abs(a) < ZERO, tf.float32)) for a in after]
    moved = [2.0 * tf.nn.l2_loss(a - i) for a, i in zip(after, initial, strict=True)]
    return [np.array([float(x) for x in xs]) for xs in (step_sq, param_sq, zeros, moved)]


def per_layer(trainer: Trainer, per_variable_values: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Per-variable sums and counts gathered into the row's per-layer statistics."""
    variables = trainer.model.trainable_variables
    layers = list(dict.fromkeys(layer_of(v.path) for v in variables))
    index = np.array([layers.index(layer_of(v.path)) for v in variables])
    sizes = np.array([v.shape.num_elements() for v in variables], dtype=np.float64)

    def gathered(values: np.ndarray) -> np.ndarray:
        return np.bincount(index, weights=values, minlength=len(layers))

    step_sq, param_sq, zeros, moved = per_variable_values
    step, param = np.sqrt(gathered(step_sq)), np.sqrt(gathered(param_sq))
    statistics = {
        "step_norm": step,
        "param_norm": param,
        "update_ratio": step / np.maximum(param, 1e-12),
        "sparsity": gathered(zeros) / gathered(sizes),
        "distance_from_init": np.sqrt(gathered(moved)),
    }
    return {f"{k}/{layer}": v[i] for k, v in statistics.items() for i, layer in enumerate(layers)}


@pytest.fixture(scope="module", params=["lenet", "tiny_vit"])
def stepped(request: pytest.FixtureRequest):
    """A trainer of the model after `STEPS` steps, the weights at its start and before and
    after its last step, and the row that step logged."""
    models.catalog(plugins=True)  # the plugin models registered
    config = RunConfig(
        model=request.param, dataset="digits", max_steps=10, seed=3, **INSTRUMENTS_OFF
    )
    trainer = Trainer(config, make_strategy(config.strategy))
    initial = [v.numpy() for v in trainer.model.trainable_variables]
    for step in range(1, STEPS):
        trainer.step(step, log=False)
    before = [v.numpy() for v in trainer.model.trainable_variables]
    row = trainer.step(STEPS, log=True, per_layer=True).values
    after = [v.numpy() for v in trainer.model.trainable_variables]
    yield trainer, initial, before, after, row
    trainer.close()


# Ops that read or name a variable, one per variable whatever is computed from them.
READS = {"ReadVariableOp", "Placeholder", "Const", "Identity", "NoOp"}


def computing_ops(depth: int, telemetry: bool) -> int:
    """Ops (reads aside) of a traced optimizer step of an MLP of `depth` hidden layers of
    one width: with telemetry and the per-layer statistics, or without either."""
    layers = [keras.layers.Dense(16, name=f"hidden{i}") for i in range(depth)]
    model = keras.Sequential([keras.Input((16,)), *layers, keras.layers.Dense(3)])
    optimizer = optimizers.build("adamw", telemetry=telemetry)
    optimizer.build(model.trainable_variables)
    statistics = LayerStatistics(model, optimizer)

    @tf.function(autograph=False)
    def step() -> dict[str, tf.Tensor]:
        grads = [tf.ones_like(v) for v in model.trainable_variables]
        optimizer.apply(grads, model.trainable_variables)
        return statistics() if telemetry else {}

    graph = step.get_concrete_function().graph
    return sum(op.type not in READS for op in graph.get_operations())


def test_the_statistics_cost_no_more_ops_on_a_model_deeper_in_small_layers() -> None:
    added = {depth: computing_ops(depth, True) - computing_ops(depth, False) for depth in (4, 16)}
    assert added[4] > 0  # the statistics are traced ...
    assert added[16] == added[4]  # ... in as many ops for 12 more layers of that shape


@pytest.mark.parametrize("width", [16, 64])  # kernels of 256 and of 4,096 entries
def test_the_per_layer_statistics_cost_no_more_ops_on_a_deeper_model(width: int) -> None:
    def ops(depth: int) -> int:
        layers = [keras.layers.Dense(width, name=f"hidden{i}") for i in range(depth)]
        model = keras.Sequential([keras.Input((width,)), *layers, keras.layers.Dense(3)])
        optimizer = optimizers.build("adamw", telemetry=True)
        optimizer.build(model.trainable_variables)
        statistics = LayerStatistics(model, optimizer)
        graph = tf.function(statistics, autograph=False).get_concrete_function().graph
        return sum(op.type not in READS for op in graph.get_operations())

    assert ops(16) == ops(4)


def test_per_tensor_measures_stack_each_list_once_for_every_measure() -> None:
    rng = np.random.default_rng(1)
    shapes = [(64, 64), (64,), (64, 64), (300, 300), (64,), (64, 64)]
    a = [rng.normal(size=s).astype(np.float32) for s in shapes]
    b = [rng.normal(size=s).astype(np.float32) for s in shapes]
    measures = {
        "squares": lambda x, _, *, axis: transforms.half_squares_measure(x, axis=axis),
        "distances": transforms.half_distances_measure,
    }

    def measured(x: list[tf.Tensor], y: list[tf.Tensor]) -> dict[str, tf.Tensor]:
        return transforms.per_tensor_measures(measures, x, y, stacked_at_most=1 << 13)

    found = measured([tf.constant(x) for x in a], [tf.constant(y) for y in b])
    a64, b64 = ([x.astype(np.float64) for x in xs] for xs in (a, b))
    np.testing.assert_allclose(2 * found["squares"].numpy(), [np.sum(x**2) for x in a64], rtol=1e-5)
    np.testing.assert_allclose(
        2 * found["distances"].numpy(),
        [np.sum((x - y) ** 2) for x, y in zip(a64, b64, strict=True)],
        rtol=1e-5,
    )
    traced = tf.function(measured).get_concrete_function(
        [tf.constant(x) for x in a], [tf.constant(y) for y in b]
    )
    # Two repeated shapes, stacked once in each list; the 300 × 300 one measured in place.
    assert [op.type for op in traced.graph.get_operations()].count("Pack") == 2 * 2 + 2


def test_the_row_matches_the_per_variable_ops(stepped) -> None:
    trainer, initial, before, after, row = stepped
    old = per_layer(
        trainer, per_variable(*([tf.constant(w) for w in ws] for ws in (before, after, initial)))
    )
    new = {key: row[key] for key in old}
    np.testing.assert_allclose(list(new.values()), list(old.values()), rtol=2e-6, atol=1e-7)


def test_the_row_matches_a_float64_reference(stepped) -> None:
    trainer, initial, before, after, row = stepped
    f64 = [[w.astype(np.float64) for w in ws] for ws in (before, after, initial)]
    before64, after64, initial64 = f64
    reference = per_layer(
        trainer,
        [
            np.array([np.sum((a - b) ** 2) for a, b in zip(after64, before64, strict=True)]),
            np.array([np.sum(a**2) for a in after64]),
            np.array([np.sum(np.abs(a) < ZERO) for a in after64], dtype=np.float64),
            np.array([np.sum((a - i) ** 2) for a, i in zip(after64, initial64, strict=True)]),
        ],
    )
    np.testing.assert_allclose([row[k] for k in reference], list(reference.values()), rtol=1e-5)
    total = np.sqrt(sum(np.sum((a - i) ** 2) for a, i in zip(after64, initial64, strict=True)))
    assert row["distance_from_init"] == pytest.approx(total, rel=1e-5)


def test_a_logged_step_without_them_has_no_per_layer_values(stepped) -> None:
    trainer, *_ = stepped
    row = trainer.step(STEPS + 1, log=True, per_layer=False).values
    assert "loss" in row and "grad_norm" in row and "param_norm" in row
    assert not [key for key in row if "/" in key] and "distance_from_init" not in row


def test_per_tensor_keeps_the_order_of_mixed_shapes() -> None:
    rng = np.random.default_rng(0)
    shapes = [(3, 4), (5,), (3, 4), (), (5,), (300, 300), (3, 4)]
    arrays = [rng.normal(size=s).astype(np.float32) for s in shapes]
    tensors = [tf.constant(a) for a in arrays]
    expected = [np.sum(a.astype(np.float64) ** 2) for a in arrays]
    np.testing.assert_allclose(transforms.squared_norms(tensors).numpy(), expected, rtol=1e-5)
    variables = [keras.Variable(a) for a in arrays]  # as a model holds them: read as stacked
    np.testing.assert_allclose(transforms.squared_norms(variables).numpy(), expected, rtol=1e-5)
    traced = tf.function(transforms.squared_norms).get_concrete_function(tensors).graph
    ops = [op.type for op in traced.get_operations()]
    # One stacked reduction for each repeated small shape; the large one measured in place.
    assert ops.count("Pack") == 3 and ops.count("L2Loss") == 2


def test_steps_with_them_and_without_are_one_trace_and_train_alike() -> None:
    """The statistics are a branch the step takes as it runs (`LayerStatistics.when`): a
    run that measures them at every step and one that measures them at every other train
    the same weights, each with one trace of its logged step; a step with them after one
    without measures its own step, not the zeros the other left."""
    config = RunConfig(model="mlp", dataset="digits", max_steps=10, seed=5, **INSTRUMENTS_OFF)
    every, other = (Trainer(config, make_strategy(config.strategy)) for _ in range(2))
    for step in range(1, 7):
        every_row = every.step(step, log=True, per_layer=True).values
        other_row = other.step(step, log=True, per_layer=step % 2 == 1).values
        if step % 2 == 1:
            assert other_row.keys() == every_row.keys()
            for key, value in every_row.items():
                assert other_row[key] == pytest.approx(value, rel=1e-5, abs=1e-7), (step, key)
        else:
            assert not [key for key in other_row if "/" in key]
    for a, b in zip(every.model.trainable_variables, other.model.trainable_variables, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    assert len(every._traces) == len(other._traces) == 1
    for trainer in (every, other):
        trainer.close()


def test_a_cond_runs_as_a_call_of_the_branch_taken() -> None:
    """`keras_internals.called_cond` is not lowered to switches, which every op of the
    branch not taken would still pass through at each step."""

    def step(taken: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
        return keras_internals.called_cond(taken, lambda: tf.reduce_sum(tf.square(x)), lambda: 0.0)

    traced = tf.function(step).get_concrete_function(tf.constant(True), tf.ones([3]))
    (branching,) = [op for op in traced.graph.get_operations() if op.type.endswith("If")]
    assert branching.get_attr("_lower_using_switch_merge") is False
    assert float(traced(tf.constant(True), tf.ones([3]))) == 3.0
    assert float(traced(tf.constant(False), tf.ones([3]))) == 0.0
