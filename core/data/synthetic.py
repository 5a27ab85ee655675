"""Datasets the lab makes itself, exactly, from a fixed seed: offline, in a millisecond.

`quadratic` is a regression whose loss, for the `linear` model (the output head alone,
ŷ = x·w + b), is an exact quadratic of known spectrum. The mean squared error

    f(w, b) = (1/n) ‖Xw + b·1 − y‖²

has the Hessian (2/n)·[XᵀX, Xᵀ1; 1ᵀX, n]. The columns of X are centered (Xᵀ1 = 0), so
it is block-diagonal: (2/n)·XᵀX for the weights and 2 for the bias. X = Q·diag(s)·Vᵀ,
with Q's orthonormal columns orthogonal to 1, V orthogonal and sᵢ = √(n·λᵢ/2), so that
(2/n)·XᵀX = V·diag(λ)·Vᵀ exactly. The d + 1 eigenvalues of the whole Hessian are
log-spaced from μ = L/κ to L = 2, the bias's own:

    λₖ = μ·κ^(k/d),  k = 0 … d   (k = d: the bias, 2)

The targets are y = X·w* + b*, with nothing added: the loss's minimum is 0, at (w*, b*).
The test split is made the same way from other rows, with the same spectrum.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from core.data.dataset import Dataset
from core.data.files import from_arrays

FEATURES = 20
KAPPA = 100.0  # the condition number L/μ of the loss's Hessian
LARGEST = 2.0  # L: the bias's curvature, d²f/db² = 2, with centered features
SMALLEST = LARGEST / KAPPA  # μ
TRAIN_SIZE, TEST_SIZE = 256, 64
BIAS = 1.0  # b*: the bias the model must learn too
_SEED = 20_170_404  # Goh's "Why Momentum Really Works", Distill, April 2017

#: The eigenvalues of the loss's Hessian over the d weights and the bias, smallest first.
EIGENVALUES = SMALLEST * KAPPA ** (np.arange(FEATURES + 1) / FEATURES)


def load_quadratic() -> Dataset:
    """The `quadratic` regression: 20 features, 256 train and 64 test examples."""
    rng = np.random.default_rng(_SEED)
    directions = _orthogonal(rng, FEATURES)  # V: the Hessian's eigenvectors
    weights = rng.standard_normal(FEATURES)  # w*
    arrays = {}
    for split, size in (("train", TRAIN_SIZE), ("test", TEST_SIZE)):
        x = _features(rng, size, directions)
        arrays[f"x_{split}"] = x.astype(np.float32)
        arrays[f"y_{split}"] = (x @ weights + BIAS).astype(np.float32)
    return from_arrays("quadratic", arrays, problem="regression")


def _features(rng: np.random.Generator, n: int, directions: np.ndarray) -> np.ndarray:
    """n rows whose columns are centered and (2/n)·XᵀX = V·diag(λ)·Vᵀ, λ the weights'
    eigenvalues (all but the bias's, the largest)."""
    centered = rng.standard_normal((n, FEATURES))
    centered -= centered.mean(axis=0)
    rows, _ = np.linalg.qr(centered)  # orthonormal columns spanning centered ones: ⟂ 1
    scales = np.sqrt(n * EIGENVALUES[:-1] / 2)
    return (rows * scales) @ directions.T


def _orthogonal(rng: np.random.Generator, size: int) -> np.ndarray:
    """A random orthogonal matrix (Q of a Gaussian matrix's QR, its signs fixed)."""
    q, r = np.linalg.qr(rng.standard_normal((size, size)))
    return q * np.sign(np.diag(r))


#: The loader of each dataset made here, by its name in `core.data.builtin.CATALOG`.
LOADERS: dict[str, Callable[[], Dataset]] = {"quadratic": load_quadratic}
