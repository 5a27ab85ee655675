"""Under `tf.distribute.MirroredStrategy` (two logical CPUs) the knobs act on the
all-reduced gradient, replicas never drift, and checkpoints hold the whole state."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from core import optimizers
from core.training.strategies import make_strategy
from tests.optimizer_fixtures import (
    GlobalHeavyBall,
    compile_model,
    global_norm,
    small_data,
    small_model,
)


@pytest.fixture(scope="module")
def mirrored() -> tf.distribute.MirroredStrategy:
    strategy = make_strategy("mirrored")
    assert strategy.num_replicas_in_sync == 2, "tests/conftest.py configures two logical CPUs"
    return strategy


def replica_values(variable: keras.Variable) -> list[np.ndarray]:
    return [
        np.asarray(v)
        for v in tf.distribute.get_strategy().experimental_local_results(variable.value)
    ]


def test_clip_norm_acts_on_the_all_reduced_gradient(mirrored) -> None:
    # Each replica sends [3, 4]; their sum [6, 8] clipped to norm 1 is [0.6, 0.8].
    with mirrored.scope():
        ours = keras.Variable([0.0, 0.0])
        theirs = keras.Variable([0.0, 0.0])
        ours_opt = optimizers.build("sgd", learning_rate=1.0, clip_norm=1.0)
        theirs_opt = keras.optimizers.SGD(1.0, global_clipnorm=1.0)
        ours_opt.build([ours])
        theirs_opt.build([theirs])

    @tf.function
    def step() -> None:
        def replica_step() -> None:
            grad = tf.constant([3.0, 4.0])
            ours_opt.apply([grad], [ours])
            theirs_opt.apply([grad], [theirs])

        mirrored.run(replica_step)

    step()
    with mirrored.scope():
        for copy in mirrored.experimental_local_results(ours.value):
            np.testing.assert_allclose(copy.numpy(), [-0.6, -0.8], rtol=1e-6)
    # Keras's own global_clipnorm clips each replica's gradient before the sum.
    np.testing.assert_allclose(theirs.numpy(), [-1.2, -1.6], rtol=1e-6)


CASES = {
    "sgd_clip_radius": lambda: optimizers.build(
        "sgd", learning_rate=0.5, clip_norm=0.5, radius=3.0
    ),
    "adamw_all_knobs": lambda: optimizers.build(
        "adamw",
        learning_rate=0.05,
        clip_norm=0.5,
        radius=3.0,
        weight_decay=0.1,
        noise_std=0.01,
        top_k=0.5,
        top_k_error_feedback=True,
        prune_threshold=1e-3,
        layer_rules=[{"pattern": "logits", "lr_mult": 2.0}],
        telemetry=True,
    ),
    "projected_gd": lambda: optimizers.build("projected_gd", learning_rate=0.5, radius=3.0),
    "global_vector": lambda: GlobalHeavyBall(learning_rate=0.1, radius=3.0, clip_norm=0.5),
}


def fit(strategy: tf.distribute.Strategy, make_optimizer) -> keras.Model:
    x, y = small_data()
    with strategy.scope():
        model = compile_model(small_model(), make_optimizer())
    model.fit(x, y, batch_size=32, epochs=3, shuffle=False, verbose=0)
    return model


@pytest.mark.parametrize("case", CASES)
def test_two_replicas_train_like_one_device(mirrored, case: str) -> None:
    one = fit(tf.distribute.get_strategy(), CASES[case])
    two = fit(mirrored, CASES[case])
    assert two.optimizer.iterations.numpy() == one.optimizer.iterations.numpy() == 12
    for a, b in zip(one.get_weights(), two.get_weights(), strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    # The projection was binding: the weights sit on the sphere of radius 3.
    assert global_norm(two.get_weights()) == pytest.approx(3.0, rel=1e-5)
    # No replica drift, in the model or the optimizer.
    with mirrored.scope():
        for variable in two.weights + two.optimizer.variables:
            copies = replica_values(variable)
            for copy in copies[1:]:
                np.testing.assert_array_equal(copy, copies[0], err_msg=variable.path)


def test_checkpoint_holds_the_whole_optimizer_state(mirrored, tmp_path) -> None:
    trained = fit(mirrored, CASES["adamw_all_knobs"])
    path = tf.train.Checkpoint(model=trained, optimizer=trained.optimizer).save(
        str(tmp_path / "ckpt")
    )

    fresh = compile_model(small_model(seed=9), CASES["adamw_all_knobs"]())
    fresh.optimizer.build(fresh.trainable_variables)
    tf.train.Checkpoint(model=fresh, optimizer=fresh.optimizer).restore(path).assert_consumed()
    saved, restored = trained.optimizer.variables, fresh.optimizer.variables
    names = [v.name.split("hidden_")[-1].split("logits_")[-1] for v in saved]
    assert names == [v.name.split("hidden_")[-1].split("logits_")[-1] for v in restored]
    assert {"iteration", "learning_rate", "radius"} <= set(names)
    assert any(n.endswith("_m") for n in names) and any("residual" in n for n in names)
    assert fresh.optimizer.iterations.numpy() == 12
    for before, after in zip(saved, restored, strict=True):
        np.testing.assert_array_equal(after.numpy(), before.numpy(), err_msg=before.name)


def sparse_step(
    strategy: tf.distribute.Strategy,
    optimizer: keras.optimizers.Optimizer,
    table: keras.Variable,
    sparse: bool,
) -> tf.types.experimental.GenericFunction:
    """A step where replica r sends rows 1 and 4 of ones × (r + 1), as `tf.IndexedSlices`
    or as the dense tensor it stands for."""

    @tf.function
    def step() -> None:
        def replica_step() -> None:
            replica = tf.distribute.get_replica_context().replica_id_in_sync_group
            rows = tf.ones((2, 3)) * tf.cast(replica + 1, tf.float32)
            grad = tf.IndexedSlices(rows, tf.constant([1, 4]), tf.constant([10, 3]))
            optimizer.apply([grad if sparse else tf.convert_to_tensor(grad)], [table])

        strategy.run(replica_step)

    return step


def test_a_sparse_gradient_is_all_reduced_and_scattered_into_every_replica(mirrored) -> None:
    # The rows-only step (sgd with clip_norm) equals the dense gradient's, on both copies.
    tables = []
    for sparse in (True, False):
        with mirrored.scope():
            table = keras.Variable(np.ones((10, 3), "float32"))
            optimizer = optimizers.build("sgd", learning_rate=0.1, clip_norm=0.5, telemetry=True)
            optimizer.build([table])
        step = sparse_step(mirrored, optimizer, table, sparse)
        step()
        step()
        with mirrored.scope():
            copies = replica_values(table)
        np.testing.assert_array_equal(copies[0], copies[1])
        tables.append(copies[0])
    np.testing.assert_allclose(*tables, rtol=1e-6)
    assert (tables[0][[0, 2, 3, 5]] == 1.0).all() and (tables[0][[1, 4]] < 1.0).all()
