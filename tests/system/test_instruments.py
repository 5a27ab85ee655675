"""The instruments on problems whose answer is known, and in real runs."""

from __future__ import annotations

from types import SimpleNamespace

import keras
import numpy as np
import pytest
import tensorflow as tf

from core import optimizers
from core.charts import INSTRUMENT_HELP
from core.engine import Engine, RunConfig, run_fields
from core.knobs import InvalidInput
from core.training import instruments
from core.training.config import instrument_intervals
from tests.imports import heavy_modules_after
from tests.waiting import scaled


def quadratic_alpha(curvature: float, learning_rate: float) -> float:
    """α of one SGD step (our optimizer, autodiff derivatives) on ½·λ·‖θ‖²."""
    theta = keras.Variable(np.array([1.0, -2.0, 0.5], np.float32))

    def loss_and_grad() -> tuple[tf.Tensor, list[tf.Tensor]]:
        with tf.GradientTape() as tape:
            loss = 0.5 * curvature * tf.reduce_sum(tf.square(theta.value))
        return loss, tape.gradient(loss, [theta.value])

    f0, g0 = loss_and_grad()
    before = tf.identity(theta.value)
    optimizers.build("sgd", learning_rate=learning_rate).apply(g0, [theta])
    direction = [theta.value - before]
    f1, g1 = loss_and_grad()
    return float(
        instruments.alpha(f0, f1, instruments.dot(g0, direction), instruments.dot(g1, direction))
    )


@pytest.mark.parametrize(
    ("factor", "expected"), [(1.0, 0.0), (2.0, 1.0), (1e-4, -1.0), (0.5, -0.5), (1.5, 0.5)]
)
def test_alpha_on_a_quadratic_with_known_curvature(factor: float, expected: float) -> None:
    curvature = 4.0
    assert quadratic_alpha(curvature, factor / curvature) == pytest.approx(expected, abs=1e-3)


def test_alpha_is_nan_without_a_minimum_ahead() -> None:
    # Concave along the step: no valley to land in.
    assert np.isnan(float(instruments.alpha(1.0, 0.0, -1.0, -3.0)))


def test_sharpness_finds_the_top_eigenvalue_of_a_known_spectrum() -> None:
    rng = np.random.default_rng(0)
    spectrum = np.array([7.5, 3.0, 1.0, 0.2, -0.5, 0.0])
    basis, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    hessian = tf.constant(basis @ np.diag(spectrum) @ basis.T, tf.float32)
    theta = tf.Variable(rng.normal(size=6).astype(np.float32))

    def hvp(vector: list[tf.Tensor]) -> list[tf.Tensor]:
        with tf.GradientTape() as outer:
            with tf.GradientTape() as inner:
                loss = 0.5 * tf.tensordot(theta, tf.linalg.matvec(hessian, theta), 1)
            slope = instruments.dot(inner.gradient(loss, [theta]), vector)
        return outer.gradient(slope, [theta])

    start = [tf.constant(rng.normal(size=6), tf.float32)]
    eigenvalue, vector = instruments.power_iteration(hvp, start, iterations=60)
    assert float(eigenvalue) == pytest.approx(7.5, rel=0.01)
    np.testing.assert_allclose(abs(np.dot(vector[0].numpy(), basis[:, 0])), 1.0, atol=1e-3)


def test_noise_scale_recovers_known_gradient_noise() -> None:
    # Per-example gradients θ − z with z ~ N(μ, σ²I): G = θ − μ and tr(Σ) = σ²·d.
    rng = np.random.default_rng(1)
    dimension, sigma, batch = 50, 0.8, 64
    gradient = rng.normal(size=dimension) * 0.2
    true_grad_sq, true_trace = np.sum(gradient**2), sigma**2 * dimension
    grad_sq_estimates, trace_estimates = [], []
    for _ in range(3000):
        examples = gradient + sigma * rng.normal(size=(batch, dimension))
        halves = examples[: batch // 2].mean(0), examples[batch // 2 :].mean(0)
        small_sq = (np.sum(halves[0] ** 2) + np.sum(halves[1] ** 2)) / 2
        big_sq = np.sum(examples.mean(0) ** 2)
        grad_sq, trace = instruments.noise_scale_terms(small_sq, big_sq, batch / 2, batch)
        grad_sq_estimates.append(float(grad_sq))
        trace_estimates.append(float(trace))
    assert np.mean(trace_estimates) == pytest.approx(true_trace, rel=0.03)
    assert np.mean(grad_sq_estimates) == pytest.approx(true_grad_sq, rel=0.1)
    noise_scale = np.mean(trace_estimates) / np.mean(grad_sq_estimates)
    assert noise_scale == pytest.approx(true_trace / true_grad_sq, rel=0.1)


def test_magnitude_histogram_bins_orders_of_magnitude() -> None:
    values = [tf.constant([0.0, 1e-9, 1e-7, 3e-3, 0.5, -0.5, 5.0, 1e6])]
    counts = instruments.magnitude_histogram(values).numpy()
    edges = instruments.histogram_edges()
    assert counts.sum() == 8 and len(counts) == len(edges) - 1
    assert counts[0] == 2  # zero and 1e-9: below the first edge
    assert counts[-1] == 1  # 1e6: above the last edge
    assert counts[np.searchsorted(edges, np.log10(0.5)) - 1] == 2


def test_magnitude_histograms_count_each_tensor_in_its_row() -> None:
    from core.training.instruments import measures

    rng = np.random.default_rng(1)
    shapes = [(3, 4), (4,), (3, 4), (4,), (7,), (3, 4)]
    arrays = [
        (rng.normal(size=s) * 10.0 ** rng.uniform(-9, 3, size=s)).astype(np.float32) for s in shapes
    ]
    rows = [0, 0, 1, 1, 2, 0]
    counts = measures.magnitude_histograms([tf.constant(a) for a in arrays], rows, 3).numpy()
    width = (measures.HISTOGRAM_HIGH - measures.HISTOGRAM_LOW) / measures.HISTOGRAM_BINS
    for row in range(3):
        entries = np.concatenate([a.ravel() for a, r in zip(arrays, rows, strict=True) if r == row])
        logs = np.log10(np.maximum(np.abs(entries.astype(np.float64)), 1e-30))
        bins = np.clip(
            np.floor((logs - measures.HISTOGRAM_LOW) / width), 0, measures.HISTOGRAM_BINS - 1
        )
        expected = np.bincount(bins.astype(int), minlength=measures.HISTOGRAM_BINS)
        np.testing.assert_array_equal(counts[row], expected)


@pytest.fixture
def engine(tmp_path):
    engine = Engine(tmp_path / "lab.sqlite")
    yield engine
    engine.close()


SMALL = {
    "dataset": "digits",
    "model": "mlp",
    "optimizer": "sgd",
    "max_steps": 40,
    "alpha_every": 4,
    "sharpness_every": 20,
    "noise_scale_every": 5,
    "histogram_every": 10,
}


@pytest.mark.parametrize("strategy", ["default", "mirrored"])
def test_a_run_records_every_instrument(engine, strategy: str) -> None:
    run_id = engine.start(RunConfig.from_dict({**SMALL, "strategy": strategy}))
    assert engine.wait(run_id, scaled(120)).status == "completed"
    metrics = engine.metrics(run_id)
    logged = {
        key: metrics.steps[~np.isnan(metrics[key])].tolist()
        for key in ("alpha", "sharpness", "noise_scale")
    }
    # α is NaN (not stored) at a step whose parabola has no minimum ahead: rare.
    assert set(logged.pop("alpha")) <= set(range(4, 41, 4))
    assert logged.pop("sharpness") == [20, 40]
    # B is unknown (NaN) while the running averages are not yet both positive.
    assert set(logged.pop("noise_scale")) <= set(range(5, 41, 5))
    assert metrics.steps[~np.isnan(metrics["noise_scale/trace"])].tolist() == list(range(5, 41, 5))
    assert np.count_nonzero(~np.isnan(metrics["alpha"])) >= 7
    assert np.all(metrics["sharpness"][~np.isnan(metrics["sharpness"])] > 0)
    assert np.all(metrics["noise_scale"][~np.isnan(metrics["noise_scale"])] > 0)
    distance = metrics["distance_from_init"]
    assert distance[0] > 0 and distance[-1] > distance[0]
    layers = np.sqrt(
        sum(metrics[f"distance_from_init/{layer}"] ** 2 for layer in ("dense1", "dense2", "logits"))
    )
    np.testing.assert_allclose(layers, distance, rtol=1e-5)
    histograms = [e for e in engine.events(run_id) if e.kind == "histogram"]
    assert [e.step for e in histograms] == [10, 20, 30, 40]
    sizes = {"dense1": 64 * 128 + 128, "dense2": 128 * 64 + 64, "logits": 64 * 10 + 10}
    for event in histograms:
        assert len(event.payload["edges"]) == len(event.payload["grad"]["dense1"]) + 1
        for kind in ("grad", "weight"):
            assert {k: sum(v) for k, v in event.payload[kind].items()} == sizes


def test_instruments_can_be_turned_off(engine) -> None:
    off = {k: 0 for k in ("alpha_every", "sharpness_every", "noise_scale_every", "histogram_every")}
    run_id = engine.start(RunConfig.from_dict({**SMALL, **off, "max_steps": 10}))
    engine.wait(run_id, scaled(60))
    keys = set(engine.metrics(run_id).keys)
    assert not keys & {"alpha", "sharpness", "noise_scale"}
    assert not [e for e in engine.events(run_id) if e.kind == "histogram"]


def test_sharpness_examples_measure_runs_of_other_batches_on_the_same_data(engine) -> None:
    """Runs that differ in their batch order alone, with weights that hardly move (η = 1e-9):
    on their first batches their sharpness differs; on the split's first 300 examples it
    is the same."""

    def sharpness(data_seed: int, examples: int | None) -> float:
        fields = {"data_seed": data_seed, "sharpness_examples": examples, "max_steps": 1}
        config = {**SMALL, **fields, "hyperparameters": {"learning_rate": 1e-9}}
        run_id = engine.start(RunConfig.from_dict({**config, "sharpness_every": 1}))
        assert engine.wait(run_id, scaled(60)).status == "completed"
        return float(engine.metrics(run_id)["sharpness"][-1])

    first_batches = sharpness(1, None), sharpness(2, None)
    same_examples = sharpness(1, 300), sharpness(2, 300)
    assert abs(first_batches[0] - first_batches[1]) > 0.01 * first_batches[0], first_batches
    assert same_examples[0] == pytest.approx(same_examples[1], rel=1e-5), same_examples


def test_sharpness_examples_are_at_most_the_training_split() -> None:
    with pytest.raises(InvalidInput) as caught:
        RunConfig.from_dict({**SMALL, "sharpness_examples": 1_439})
    assert set(caught.value.errors) == {"sharpness_examples"}
    assert "1,438" in caught.value.errors["sharpness_examples"]


def test_alpha_tells_a_timid_step_from_an_overshoot(engine) -> None:
    def median_alpha(learning_rate: float) -> float:
        run_id = engine.start(
            RunConfig.from_dict(
                {
                    **SMALL,
                    "hyperparameters": {"learning_rate": learning_rate},
                    "alpha_every": 2,
                    "max_steps": 60,
                }
            )
        )
        engine.wait(run_id, scaled(120))
        values = engine.metrics(run_id)["alpha"]
        return float(np.nanmedian(values))

    assert median_alpha(1e-4) < -0.9
    assert median_alpha(1.0) > 0


# Instruments declare their field, spacing and captions, without TensorFlow ----------


def test_declaring_the_instruments_imports_neither_tensorflow_nor_keras() -> None:
    assert heavy_modules_after("import core.training.config, core.charts") == []


def test_every_instrument_has_its_field_and_captions() -> None:
    fields = run_fields()
    for name, instrument in instruments.INSTRUMENTS.items():
        assert fields[f"{name}_every"].help.startswith(instrument.field_help)
        assert hasattr(RunConfig(), f"{name}_every")
        assert instrument.help.items() <= INSTRUMENT_HELP.items()


def test_an_instruments_spacing_sets_its_default_interval(monkeypatch) -> None:
    class Sparse(instruments.Instrument):
        name = "sparse"
        field_help = "Measure rarely"
        spacing = 3

    monkeypatch.setitem(instruments.INSTRUMENTS, "sparse", Sparse)
    config = SimpleNamespace(
        log_every=2,
        telemetry=True,
        dp_clip=None,  # not DP-SGD, which leaves some instruments off
        **{f"{n}_every": None for n in instruments.INSTRUMENTS},
    )
    intervals = instrument_intervals(config, total_steps=400)  # base: 400 / 20 = 20 steps
    assert intervals["alpha"] == 20 and intervals["sharpness"] == 80
    assert intervals["sparse"] == 60
