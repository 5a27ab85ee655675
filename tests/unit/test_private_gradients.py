"""DP-SGD's gradient (`core.training.private_gradients`) against a float64 NumPy
reference: a linear softmax classifier, whose per-example gradients have a closed form,
clipped per example and summed; with σ = 0 and a huge C it is the plain gradient; its
noise has standard deviation σ·C/B, drawn once however many replicas sum it."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from core.training.losses import SingleTask
from core.training.private_gradients import PrivateGradients, clipped_sum

FEATURES, CLASSES, EXAMPLES = 5, 3, 8


def linear(features: int = FEATURES, seed: int = 0) -> keras.Model:
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((features,)), keras.layers.Dense(CLASSES)])


def batch(examples: int = EXAMPLES, features: int = FEATURES, seed: int = 1):
    rng = np.random.default_rng(seed)
    x = rng.normal(scale=2.0, size=(examples, features)).astype(np.float32)
    y = rng.integers(0, CLASSES, size=examples).astype(np.int64)
    return x, y


def per_example_reference(model: keras.Model, x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    """Each example's gradient of its cross-entropy, [(n, features, classes), (n, classes)],
    in float64: for logits z = xW + b, ∂ℓ/∂z = softmax(z) − onehot(y)."""
    kernel, bias = (np.asarray(v, np.float64) for v in model.get_weights())
    z = x.astype(np.float64) @ kernel + bias
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    delta = p - np.eye(CLASSES)[y]
    return [x.astype(np.float64)[:, :, None] * delta[:, None, :], delta]


def clipped_reference(per_example: list[np.ndarray], clip: float) -> list[np.ndarray]:
    norms = np.sqrt(sum((g.reshape(len(g), -1) ** 2).sum(axis=1) for g in per_example))
    scale = np.minimum(1.0, clip / norms)
    return [np.tensordot(scale, g, axes=1) for g in per_example]


def private(
    model: keras.Model,
    *,
    clip: float,
    noise: float,
    expected: float,
    seed: int = 7,
    ghost: bool = True,
):
    step = tf.Variable(0, dtype=tf.int64)
    task = SingleTask(global_batch=EXAMPLES)
    return PrivateGradients(
        task,
        model,
        clip=clip,
        noise=noise,
        expected_batch=expected,
        seed=seed,
        step=step,
        ghost=ghost,
    ), step


@pytest.mark.parametrize("ghost", [True, False], ids=["ghost", "jacobian"])
@pytest.mark.parametrize("clip", [0.05, 0.5, 2.0, 1e6])
def test_the_clipped_sum_is_the_float64_per_example_reference(clip: float, ghost: bool) -> None:
    model = linear()
    x, y = batch()
    reference = per_example_reference(model, x, y)
    norms = np.sqrt(sum((g.reshape(EXAMPLES, -1) ** 2).sum(axis=1) for g in reference))
    assert clip > norms.max() or (norms > clip).any()  # a clip that clips, or none
    gradients, _ = private(model, clip=clip, noise=0.0, expected=4.0, ghost=ghost)
    assert (gradients.ghost is not None) == ghost
    computed = gradients(model, tf.constant(x), tf.constant(y)).grads
    for got, want in zip(computed, clipped_reference(reference, clip), strict=True):
        np.testing.assert_allclose(got.numpy(), want / 4.0, rtol=1e-5, atol=1e-6)


def test_the_clipping_of_jacobians_alone() -> None:
    rng = np.random.default_rng(3)
    per_example = [rng.normal(size=(6, 4, 2)), rng.normal(size=(6, 2))]
    got = clipped_sum([tf.constant(g, tf.float32) for g in per_example], 1.5)
    for a, b in zip(got, clipped_reference(per_example, 1.5), strict=True):
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-5, atol=1e-6)


def test_no_noise_and_a_huge_clip_is_the_plain_gradient() -> None:
    model = linear()
    x, y = batch()
    gradients, _ = private(model, clip=1e9, noise=0.0, expected=EXAMPLES)
    dp = gradients(model, tf.constant(x), tf.constant(y))
    plain = SingleTask(global_batch=EXAMPLES).gradients(model, tf.constant(x), tf.constant(y))
    for a, b in zip(dp.grads, plain.grads, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-7)
    assert float(dp.sums["count"]) == EXAMPLES and float(dp.sums["loss"]) > 0


def noise_of(model, gradients, x, y) -> np.ndarray:
    """The noise in a private gradient: g̃ less the noiseless one, every coordinate."""
    noiseless = PrivateGradients(
        gradients.task,
        model,
        clip=gradients.clip,
        noise=0.0,
        expected_batch=gradients.expected_batch,
        seed=gradients.seed,
        step=gradients.step,
    )
    noisy = gradients(model, tf.constant(x), tf.constant(y)).grads
    clean = noiseless(model, tf.constant(x), tf.constant(y)).grads
    return np.concatenate([(a - b).numpy().ravel() for a, b in zip(noisy, clean, strict=True)])


def test_the_noise_has_deviation_sigma_c_over_b_and_follows_the_seed_and_step() -> None:
    model = linear(features=2000)  # 6,003 coordinates: the deviation within a few %
    x, y = batch(features=2000)
    gradients, step = private(model, clip=0.5, noise=1.3, expected=4.0)
    first = noise_of(model, gradients, x, y)
    assert first.std() == pytest.approx(1.3 * 0.5 / 4.0, rel=0.05)
    assert abs(first.mean()) < 0.05 * first.std()
    np.testing.assert_array_equal(noise_of(model, gradients, x, y), first)  # stateless
    step.assign(1)
    assert not np.allclose(noise_of(model, gradients, x, y), first)  # a new step, anew


def test_two_replicas_sum_the_noise_once() -> None:
    """Under MirroredStrategy on two CPUs (tests/conftest.py), each replica's share of the
    batch summed: the noise of the sum has deviation σ·C/B, not √2 times it."""
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = linear(features=2000)
    x, y = batch(examples=8, features=2000)
    gradients, _ = private(model, clip=0.5, noise=1.3, expected=8.0)
    clean = PrivateGradients(
        gradients.task, model, clip=0.5, noise=0.0, expected_batch=8.0, seed=7, step=gradients.step
    )
    shares = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    (x_y,) = list(strategy.experimental_distribute_dataset(shares))

    def summed(private_gradients: PrivateGradients) -> np.ndarray:
        per_replica = strategy.run(lambda a, b: private_gradients(model, a, b).grads, args=x_y)
        total = [strategy.reduce("SUM", g, axis=None) for g in per_replica]
        return np.concatenate([t.numpy().ravel() for t in total])

    assert strategy.num_replicas_in_sync == 2
    noise = summed(gradients) - summed(clean)
    assert noise.std() == pytest.approx(1.3 * 0.5 / 8.0, rel=0.05)
