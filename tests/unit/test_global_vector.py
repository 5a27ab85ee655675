"""Global-vector optimizers: `update(x, g)` on the flat vector, and plugins."""

from __future__ import annotations

import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from core import optimizers
from core.optimizers import registry
from tests.optimizer_fixtures import GlobalHeavyBall, compile_model, small_data, small_model


def test_update_sees_the_flat_vectors_and_matches_reference() -> None:
    rng = np.random.default_rng(0)
    shapes = [(4, 3), (3,), (2, 2, 2)]
    init = [rng.normal(size=s).astype(np.float32) for s in shapes]
    variables = [keras.Variable(v) for v in init]
    optimizer = GlobalHeavyBall(learning_rate=0.1, radius=3.0)
    optimizer.build(variables)
    step = tf.function(lambda g: optimizer.apply(g, variables))

    x = np.concatenate([v.ravel() for v in init]).astype(np.float64)
    velocity = np.zeros_like(x)
    for _ in range(20):
        grads = [rng.normal(size=s).astype(np.float32) for s in shapes]
        step([tf.constant(g) for g in grads])
        velocity = 0.9 * velocity + np.concatenate([g.ravel() for g in grads])
        x = x - 0.1 * velocity
        x = x * min(1.0, 3.0 / np.linalg.norm(x))
        got = np.concatenate([v.numpy().ravel() for v in variables])
        assert np.linalg.norm(got - x) / np.linalg.norm(x) <= 1e-5
    assert step.experimental_get_tracing_count() == 1


def test_variables_without_gradient_are_left_alone() -> None:
    a, b = keras.Variable(np.ones(3, np.float32)), keras.Variable(np.ones(2, np.float32))
    optimizer = GlobalHeavyBall(learning_rate=0.1)
    optimizer.build([a, b])
    optimizer.apply([tf.ones(3), None], [a, b])
    np.testing.assert_allclose(a.numpy(), 0.9)
    np.testing.assert_array_equal(b.numpy(), 1.0)


def test_trains_under_model_fit() -> None:
    x, y = small_data()
    model = compile_model(small_model(), GlobalHeavyBall(learning_rate=0.05))
    history = model.fit(x, y, batch_size=32, epochs=5, verbose=0)
    assert history.history["loss"][-1] < 0.8 * history.history["loss"][0]


def test_the_example_plugin_is_in_the_registry() -> None:
    errors = optimizers.load_plugins(registry.PROJECT_ROOT / "plugins")
    assert not [path for path in errors if path.endswith("scaled_sign_gd.py")]
    spec = optimizers.get_spec("scaled_sign_gd")
    assert spec.source.endswith("plugins/scaled_sign_gd.py")
    variable = keras.Variable(np.array([1.0, -2.0, 3.0], np.float32))
    optimizer = spec.build(learning_rate=0.5)
    optimizer.apply([tf.constant([0.5, -1.0, 0.0])], [variable])
    # mean |g| = 0.5, so each coordinate moves by 0.25 against its gradient's sign.
    np.testing.assert_allclose(variable.numpy(), [0.75, -1.75, 3.0])


@pytest.mark.slow  # imports each plugin in a child process first
def test_plugins_folder_adds_optimizers_and_reports_broken_files(tmp_path) -> None:
    (tmp_path / "good.py").write_text(
        textwrap.dedent("""
        from core.optimizers import GlobalVectorOptimizer, register

        @register("test_halving", summary="Halves x.", update_rule="x ← x/2")
        class Halving(GlobalVectorOptimizer):
            def update(self, x, g):
                return x / 2
    """)
    )
    (tmp_path / "broken.py").write_text("def oops(:\n")
    (tmp_path / "taken.py").write_text(
        textwrap.dedent("""
        from core.optimizers import SGD, register
        register("sgd", summary="x", update_rule="x")(type("Again", (SGD,), {}))
    """)
    )
    (tmp_path / "_private.py").write_text("raise RuntimeError('never imported')\n")

    errors = optimizers.load_plugins(tmp_path)
    assert "SyntaxError" in errors[str(tmp_path / "broken.py")]
    assert "already registered" in errors[str(tmp_path / "taken.py")]
    assert not any("_private" in path for path in errors)
    assert optimizers.get_spec("sgd").cls is optimizers.SGD
    spec = optimizers.get_spec("test_halving")
    variable = keras.Variable(np.array([4.0, -2.0], np.float32))
    spec.build(learning_rate=0.1, radius=1.0).apply([tf.zeros(2)], [variable])
    np.testing.assert_allclose(np.linalg.norm(variable.numpy()), 1.0, rtol=1e-6)
    # Loading again imports nothing twice.
    assert optimizers.load_plugins(tmp_path) == errors


def test_missing_state_is_a_clear_error() -> None:
    class Forgetful(optimizers.GlobalVectorOptimizer):
        state_names = ("velocity",)

        def update(self, x, g, velocity):
            return x - g, {}

    variable = keras.Variable(np.ones(2, np.float32))
    with pytest.raises(ValueError, match=r"must return new \['velocity'\]"):
        Forgetful(learning_rate=0.1).apply([tf.ones(2)], [variable])


@pytest.mark.slow  # imports the plugin in a child process first
def test_a_loaded_plugins_spec_is_found_without_reading_the_folder_again(
    tmp_path, monkeypatch
) -> None:
    """Every run config, live change and trial asks for its optimizer's spec: a plugin
    loaded already must not cost a look through the plugins folder each time."""
    (tmp_path / "once.py").write_text(
        textwrap.dedent("""
        from core.optimizers import GlobalVectorOptimizer, register

        @register("test_loaded_once", summary="Keeps x.", update_rule="x ← x")
        class KeepsX(GlobalVectorOptimizer):
            def update(self, x, g):
                return x
    """)
    )
    assert str(tmp_path / "once.py") not in optimizers.load_plugins(tmp_path)
    monkeypatch.setattr(registry, "load_plugins", lambda folder=None: pytest.fail("reloaded"))
    assert optimizers.get_spec("test_loaded_once").summary == "Keeps x."
    with pytest.raises(optimizers.InvalidHyperparameters, match="optimizer"):
        monkeypatch.undo()
        optimizers.get_spec("no_such_optimizer")
