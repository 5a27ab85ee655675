"""Sparse gradients (`tf.IndexedSlices`, an embedding's): the rows they touch are updated
with a scatter when every knob that is on acts row by row, and the result is always the
dense gradient's."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import pytest
import tensorflow as tf

from core import optimizers
from core.optimizers.optimizer_catalog import BUILTIN_NAMES

ROWS, WIDTH = 50, 4
INDICES = [3, 17, 3, 40, 17, 3]  # rows given twice or thrice add up


def sparse_gradient(step: int) -> tf.IndexedSlices:
    values = np.random.default_rng(step).normal(size=(len(INDICES), WIDTH)).astype("float32")
    return tf.IndexedSlices(tf.constant(values), tf.constant(INDICES), tf.constant([ROWS, WIDTH]))


def table() -> keras.Variable:
    start = np.random.default_rng(7).normal(size=(ROWS, WIDTH)).astype("float32")
    return keras.Variable(start, name="embeddings")


def trained(name: str, knobs: dict[str, Any], *, sparse: bool, steps: int = 3) -> tuple:
    """The table after `steps` steps of `name` with `knobs`, and the last step's stats."""
    optimizer = optimizers.build(name, learning_rate=0.1, telemetry=True, **knobs)
    variable = table()
    for step in range(steps):
        gradient = sparse_gradient(step)
        optimizer.apply([gradient if sparse else tf.convert_to_tensor(gradient)], [variable])
    return variable.numpy(), {k: v.numpy() for k, v in optimizer.stats.items()}


ROW_BY_ROW = [{}, {"clip_norm": 0.5}, {"layer_rules": [{"pattern": "emb", "lr_mult": 3.0}]}]
WHOLE = [
    {"weight_decay": 0.1},
    {"l2": 0.1},
    {"noise_std": 0.01},
    {"top_k": 0.5},
    {"prune_threshold": 0.3},
    {"radius": 5.0},
]


@pytest.mark.slow  # 50 cases
@pytest.mark.parametrize("knobs", ROW_BY_ROW + WHOLE, ids=str)
@pytest.mark.parametrize("name", sorted(BUILTIN_NAMES))
def test_a_sparse_gradient_trains_as_its_dense_self(name: str, knobs: dict[str, Any]) -> None:
    if name == "adamw" and "weight_decay" not in knobs:
        knobs = {**knobs, "weight_decay": 0.01}
    sparse_table, sparse_stats = trained(name, knobs, sparse=True)
    dense_table, dense_stats = trained(name, knobs, sparse=False)
    np.testing.assert_allclose(sparse_table, dense_table, rtol=1e-5, atol=1e-6)
    assert sparse_stats.keys() == dense_stats.keys()
    for key in sparse_stats:  # the norms too, from the rows and the rest of the table
        np.testing.assert_allclose(sparse_stats[key], dense_stats[key], rtol=1e-4, err_msg=key)


def written_ops(name: str, knobs: dict[str, Any]) -> set[str]:
    """The kinds of op that a traced step of `name` writes the table with."""
    optimizer = optimizers.build(name, learning_rate=0.1, **knobs)
    variable = table()
    optimizer.build([variable])
    step = tf.function(lambda g: optimizer.apply([g], [variable]))
    graph = step.get_concrete_function(sparse_gradient(0)).graph
    writes = {"AssignVariableOp", "ResourceScatterUpdate"}
    kinds = set()
    for op in graph.get_operations():
        # The table's writes: their values have its width (the scalars' do not).
        if op.type in writes and op.inputs[-1].shape.rank == 2:
            assert op.inputs[-1].shape[-1] == WIDTH
            kinds.add(op.type)
    return kinds


@pytest.mark.parametrize("knobs", ROW_BY_ROW, ids=str)
def test_sgd_writes_only_the_touched_rows_with_a_scatter(knobs: dict[str, Any]) -> None:
    assert written_ops("sgd", knobs) == {"ResourceScatterUpdate"}


@pytest.mark.parametrize("knobs", WHOLE, ids=str)
def test_a_knob_that_acts_on_every_row_makes_the_step_dense(knobs: dict[str, Any]) -> None:
    assert written_ops("sgd", knobs) == {"AssignVariableOp"}


def test_momentum_and_adam_decay_every_row_so_they_write_the_whole_table() -> None:
    # Keras's own do too: their slots shrink each step, touched or not.
    assert written_ops("momentum", {}) == {"AssignVariableOp"}
    assert written_ops("adam", {}) == {"AssignVariableOp"}


def test_an_embedding_trains_as_with_keras_sgd() -> None:
    def model() -> keras.Model:
        keras.utils.set_random_seed(3)
        return keras.Sequential(
            [
                keras.Input((5,), dtype="int32"),
                keras.layers.Embedding(ROWS, WIDTH),
                keras.layers.GlobalAveragePooling1D(),
                keras.layers.Dense(1),
            ]
        )

    x = np.random.default_rng(0).integers(0, ROWS, size=(64, 5))
    y = np.random.default_rng(1).normal(size=(64, 1)).astype("float32")
    weights = []
    for optimizer in (optimizers.build("sgd", learning_rate=0.1), keras.optimizers.SGD(0.1)):
        net = model()
        net.compile(optimizer=optimizer, loss="mse")
        net.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
        weights.append(net.layers[0].embeddings.numpy())
    np.testing.assert_allclose(*weights, rtol=1e-5, atol=1e-6)
    assert not np.allclose(weights[0], model().layers[0].embeddings.numpy())  # it trained
