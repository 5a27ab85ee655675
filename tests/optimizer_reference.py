"""A float64 NumPy reference of every optimizer and knob, written from the documented rule.

It shares no code with `core.optimizers` except the noise draws, which the reference takes
as inputs: the order of the knobs (the `lab_optimizer.py` docstring), each algorithm's formula and
each knob's definition are written again here, plainly, one step at a time.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np


def _top_k(values: np.ndarray, fraction: float) -> np.ndarray:
    flat = values.ravel()
    k = max(1, math.ceil(fraction * flat.size))
    if k >= flat.size:
        return values.copy()
    # Stable sort on -|g| keeps the lower index first among equals, like tf.math.top_k.
    keep = np.argsort(-np.abs(flat), kind="stable")[:k]
    out = np.zeros_like(flat)
    out[keep] = flat[keep]
    return out.reshape(values.shape)


class Reference:
    """Steps a list of float64 parameters the way optimizer `algorithm` with `hp` should.

    Args:
        algorithm: `"sgd"`, `"momentum"` or `"adam"` (the class behind the registry name).
        hp: Every knob's value (as `OptimizerSpec.validate` returns them).
        params: Initial parameters.
        paths: Each parameter's variable path, for `layer_rules`.
    """

    def __init__(
        self, algorithm: str, hp: dict[str, Any], params: list[np.ndarray], paths: list[str]
    ) -> None:
        self.algorithm, self.hp = algorithm, hp
        self.params = [p.astype(np.float64) for p in params]
        self.paths = paths
        self.t = 0
        self.state = [dict(m=np.zeros_like(p), v=np.zeros_like(p)) for p in self.params]
        self.residual = [np.zeros_like(p) for p in self.params]
        self.stats: dict[str, Any] = {}

    def _rule(self, path: str) -> tuple[float, float | None]:
        for rule in self.hp["layer_rules"]:
            if re.search(rule.pattern, path):
                wd = rule.weight_decay if rule.weight_decay is not None else self.hp["weight_decay"]
                return rule.lr_mult, wd
        return 1.0, self.hp["weight_decay"]

    def _algorithm(self, g: np.ndarray, state: dict[str, np.ndarray]) -> np.ndarray:
        hp, lr = self.hp, self.hp["learning_rate"]
        if self.algorithm == "sgd":
            return -lr * g
        if self.algorithm == "momentum":
            state["m"] = hp["momentum"] * state["m"] - lr * g
            if hp["nesterov"]:
                return hp["momentum"] * state["m"] - lr * g
            return state["m"]
        if self.algorithm == "adam":
            t = self.t + 1
            b1, b2 = hp["beta_1"], hp["beta_2"]
            state["m"] = b1 * state["m"] + (1 - b1) * g
            state["v"] = b2 * state["v"] + (1 - b2) * g * g
            alpha = lr * math.sqrt(1 - b2**t) / (1 - b1**t)
            if hp["epsilon_inside_sqrt"]:
                return -alpha * state["m"] / np.sqrt(state["v"] + hp["epsilon"])
            return -alpha * state["m"] / (np.sqrt(state["v"]) + hp["epsilon"])
        raise ValueError(self.algorithm)

    def step(self, grads: list[np.ndarray], noise: list[np.ndarray] | None = None) -> None:
        hp = self.hp
        g = [x.astype(np.float64) for x in grads]
        norm = math.sqrt(sum(float(np.sum(x * x)) for x in g))
        self.stats = {"grad_norm": norm, "grad_norm_clipped": norm, "clip_active": 0.0}
        if hp["clip_norm"] is not None and norm > hp["clip_norm"]:
            g = [x * hp["clip_norm"] / norm for x in g]
            self.stats.update(grad_norm_clipped=hp["clip_norm"], clip_active=1.0)
        if hp["noise_std"] is not None:
            g = [x + hp["noise_std"] * n for x, n in zip(g, noise, strict=True)]
        if hp["top_k"] is not None:
            if hp["top_k_error_feedback"]:
                g = [x + r for x, r in zip(g, self.residual, strict=True)]
                kept = [_top_k(x, hp["top_k"]) for x in g]
                self.residual = [x - k for x, k in zip(g, kept, strict=True)]
                g = kept
            else:
                g = [_top_k(x, hp["top_k"]) for x in g]
        if hp["l2"] is not None:
            g = [x + hp["l2"] * theta for x, theta in zip(g, self.params, strict=True)]

        new, frozen = [], 0
        for theta, grad, state, path in zip(self.params, g, self.state, self.paths, strict=True):
            lr_mult, wd = self._rule(path)
            delta = lr_mult * self._algorithm(grad, state)
            if wd is not None:
                delta = delta - hp["learning_rate"] * lr_mult * wd * theta
            if hp["prune_threshold"] is not None:
                mask = np.abs(theta) < hp["prune_threshold"]
                delta = np.where(mask, 0.0, delta)
                frozen += int(mask.sum())
            new.append(theta + delta)

        norm = math.sqrt(sum(float(np.sum(x * x)) for x in new))
        self.stats["projection_active"] = 0.0
        if hp["radius"] is not None and norm > hp["radius"]:
            new = [x * hp["radius"] / norm for x in new]
            norm = hp["radius"]
            self.stats["projection_active"] = 1.0
        self.stats["param_norm"] = norm
        self.stats["pruned_frozen"] = frozen / sum(p.size for p in self.params)
        self.stats["step_sq"] = [
            float(np.sum((a - b) ** 2)) for a, b in zip(new, self.params, strict=True)
        ]
        self.params = new
        self.t += 1
