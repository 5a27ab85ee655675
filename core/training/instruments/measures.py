"""The instruments' mathematics, as small pure functions of tensors:

- `alpha`: where a step landed along its own direction, from a parabola fitted to the
  loss and the directional derivative before and after the step (on the same batch).
- `power_iteration`: the largest Hessian eigenvalue ("sharpness") from Hessian-vector
  products, without forming the Hessian.
- `noise_scale_terms`: unbiased estimates of ‖G‖² and tr(Σ) from the gradient norms of a
  batch and of its two halves, for the simple gradient noise scale B = tr(Σ)/‖G‖²
  (McCandlish et al., "An Empirical Model of Large-Batch Training", 2018, appendix A).
- `magnitude_histogram`: counts of log₁₀|x| in fixed bins, so that histograms of
  different steps line up into a heat strip.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from core.lazy import lazy_module

tf = lazy_module("tensorflow")  # TensorFlow when measuring, not when declaring

Vectors = Sequence["tf.Tensor"]

# q(t) = a·t² + b·t + c must match f(0), f(1), f'(0), f'(1): four equations in (a, b, c).
_PARABOLA = np.array([[0, 0, 1], [1, 1, 1], [0, 1, 0], [2, 1, 0]], dtype=np.float64)
# Their least-squares solution is a fixed linear map of the measurements.
_PARABOLA_FIT = np.linalg.pinv(_PARABOLA).astype(np.float32)

# Histogram bins over log10|x|: HISTOGRAM_BINS equal bins from 10^LOW to 10^HIGH; values
# below (zeros included) count in the first bin, values above in the last.
HISTOGRAM_LOW, HISTOGRAM_HIGH, HISTOGRAM_BINS = -8.0, 2.0, 20


def dot(a: Vectors, b: Vectors) -> tf.Tensor:
    """Σ a·b over two lists of tensors, as one float32 scalar (same-shape pairs at once:
    `transforms.per_tensor`)."""
    from core.optimizers import transforms  # imports TensorFlow: not when declaring

    def products(x: tf.Tensor, y: tf.Tensor, *, axis: list[int] | None) -> tf.Tensor:
        return tf.reduce_sum(tf.cast(x, tf.float32) * tf.cast(y, tf.float32), axis=axis)

    return tf.reduce_sum(transforms.per_tensor(products, a, b))


def alpha(f0: tf.Tensor, f1: tf.Tensor, df0: tf.Tensor, df1: tf.Tensor) -> tf.Tensor:
    """Cockpit's α for a step from t = 0 to t = 1 along its direction d.

    Fits q(t) = a·t² + b·t + c by least squares to the loss at both ends (f0, f1) and the
    directional derivatives ∇L·d there (df0, df1), and returns α = 1/t* − 1, where
    t* = −b/(2a) is the parabola's minimum: α ≈ −1 when the step barely moved, 0 when it
    landed at the minimum, +1 when it jumped to the mirror point on the far side of the
    valley. NaN when the parabola has no minimum ahead of the start (a ≤ 0 or b ≥ 0).
    """
    measurements = tf.cast(tf.stack([f0, f1, df0, df1]), tf.float32)
    a, b, _ = tf.unstack(tf.linalg.matvec(tf.constant(_PARABOLA_FIT), measurements))
    minimum_ahead = (a > 0) & (b < 0)
    safe_b = tf.where(minimum_ahead, b, -1.0)
    return tf.where(minimum_ahead, -2.0 * a / safe_b - 1.0, float("nan"))


def power_iteration(
    hvp: Callable[[list[tf.Tensor]], list[tf.Tensor]],
    start: list[tf.Tensor],
    iterations: int,
) -> tuple[tf.Tensor, list[tf.Tensor]]:
    """The Hessian's eigenvalue of largest magnitude, and its eigenvector.

    `hvp(v)` returns H·v; `start` is the first guess (warm-starting from the previous
    eigenvector makes a few iterations enough during training). Returns the Rayleigh
    quotient vᵀHv of the last unit vector v, and H·v normalized as the next guess.

    The iterations are a `tf.while_loop`: a traced function holds one H·v, not one per
    iteration (tracing ten double backprops took seconds).
    """

    def iterate(
        i: tf.Tensor, eigenvalue: tf.Tensor, v: list[tf.Tensor]
    ) -> tuple[tf.Tensor, tf.Tensor, list[tf.Tensor]]:
        hv = hvp(v)
        return i + 1, dot(v, hv), _normalized(hv)

    _, eigenvalue, v = tf.while_loop(
        lambda i, *_: i < iterations,
        iterate,
        (tf.constant(0), tf.constant(0.0), _normalized(start)),
        parallel_iterations=1,
    )
    return eigenvalue, v


def _normalized(vectors: list[tf.Tensor]) -> list[tf.Tensor]:
    norm = tf.sqrt(dot(vectors, vectors))
    return [tf.cast(x, tf.float32) / tf.maximum(norm, 1e-30) for x in vectors]


def noise_scale_terms(
    small_sq: tf.Tensor, big_sq: tf.Tensor, small: float, big: float
) -> tuple[tf.Tensor, tf.Tensor]:
    """Unbiased (‖G‖², tr Σ) from squared gradient norms at two batch sizes.

    `small_sq` is E‖g‖² over batches of `small` examples (e.g. the mean over the two halves
    of a batch), `big_sq` the same for batches of `big` examples. Since
    E‖g_B‖² = ‖G‖² + tr(Σ)/B (McCandlish et al., appendix A):

        ‖G‖² ≈ (big·big_sq − small·small_sq) / (big − small)
        tr Σ ≈ (small_sq − big_sq) / (1/small − 1/big)

    Single estimates are noisy; their ratio is taken after averaging over steps.
    """
    grad_sq = (big * big_sq - small * small_sq) / (big - small)
    trace = (small_sq - big_sq) / (1.0 / small - 1.0 / big)
    return grad_sq, trace


def magnitude_histogram(values: Vectors) -> tf.Tensor:
    """Counts of log₁₀|x| over `values` in the fixed bins, as a float32 vector."""
    return magnitude_histograms(values, [0] * len(values), 1)[0]


def magnitude_histograms(values: Vectors, rows: Sequence[int], count: int) -> tf.Tensor:
    """[count, bins] counts of log₁₀|x|, the entries of `values[i]` counted in row
    `rows[i]`: a histogram per layer in one pass over all the values, in a few ops
    whatever their number (`transforms.flattened`)."""
    from core.optimizers import transforms  # imports TensorFlow: not when declaring

    flat, order = transforms.flattened(values)
    sizes = [values[i].shape.num_elements() for i in order]
    if None in sizes:  # a shape known only when it runs
        sizes = [tf.size(values[i]) for i in order]
    owner = tf.repeat(tf.constant([rows[i] for i in order], tf.int32), sizes)
    logs = tf.math.log(tf.maximum(tf.abs(flat), 1e-30)) / tf.math.log(10.0)
    width = (HISTOGRAM_HIGH - HISTOGRAM_LOW) / HISTOGRAM_BINS
    bins = tf.clip_by_value(
        tf.cast(tf.floor((logs - HISTOGRAM_LOW) / width), tf.int32), 0, HISTOGRAM_BINS - 1
    )
    cells = count * HISTOGRAM_BINS
    counts = tf.math.bincount(owner * HISTOGRAM_BINS + bins, minlength=cells, maxlength=cells)
    return tf.reshape(tf.cast(counts, tf.float32), [count, HISTOGRAM_BINS])


def histogram_edges() -> np.ndarray:
    """The bin edges of `magnitude_histogram`, in log₁₀ units."""
    return np.linspace(HISTOGRAM_LOW, HISTOGRAM_HIGH, HISTOGRAM_BINS + 1)
