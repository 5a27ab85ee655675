"""The gradient noise scale B = tr(Σ)/‖G‖² (McCandlish et al., 2018), from the gradient
norms of a batch and of its two halves (`measures.noise_scale_terms`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from core.lazy import lazy_module
from core.series import SeriesKey
from core.training.instruments.instrument import Instrument, ReplicaStep
from core.training.instruments.measures import dot, noise_scale_terms
from core.training.instruments.specs import ChartSpec, Drawn, Line, LineChart, Points, Reference

if TYPE_CHECKING:
    from core.training.losses import Gradients

tf = lazy_module("tensorflow")  # TensorFlow when measuring, not when declaring

# Single estimates are noisy: the ratio is taken of running averages.
DECAY = 0.9
# The averaged ‖G‖² and tr(Σ), logged beside B: `noise_scale/grad_sq`, `noise_scale/trace`.
GRAD_SQ, TRACE = (SeriesKey("noise_scale", part).format() for part in ("grad_sq", "trace"))


def batch_size(run: Drawn) -> Points | None:
    """The run's batch size across its steps, to hold B against; None when unknown."""
    if not run.batch_size:
        return None
    steps = run.metrics.steps
    return np.array([steps[0], steps[-1]]), np.full(2, run.batch_size)


class NoiseScale(Instrument):
    """B, with the averaged ‖G‖² and tr(Σ) it is the ratio of."""

    name = "noise_scale"
    field_help = "Estimate the gradient noise scale"
    charts: ClassVar[Mapping[str, ChartSpec]] = {
        "noise_scale": LineChart(
            "Gradient noise scale B against the batch size",
            help="The gradient noise scale B: batches much larger than B (dotted: the batch "
            "size) waste compute; much smaller ones make noisy steps.",
            lines=(Line("noise_scale", "B", markers=True),),
            references=(Reference("batch size", batch_size),),
            scale="log",
        )
    }
    metrics = ("noise_scale", GRAD_SQ, TRACE)

    def __init__(self, trainer: Any) -> None:
        super().__init__(trainer)
        self._averages = tf.Variable(tf.zeros(3), trainable=False)  # grad_sq, trace, weight

    @property
    def variables(self) -> list[Any]:
        return [self._averages]

    def gradients(self, step: ReplicaStep) -> Gradients:
        # Two half batches: their gradients add up to the batch's, and their norms
        # against the whole batch's give the noise scale.
        halves = [step.gradients(*part) for part in _halves(step.x, step.y)]
        # Each half's gradient was averaged over the whole global batch: ×2 for its own.
        small = [step.all_reduced([2.0 * g for g in half.grads]) for half in halves]
        step.terms["noise/small_sq"] = (dot(small[0], small[0]) + dot(small[1], small[1])) / 2
        computed = halves[0] + halves[1]
        full = step.all_reduced(computed.grads)
        step.terms["noise/big_sq"] = dot(full, full)
        return computed

    def finish(self, outputs: dict[str, tf.Tensor]) -> None:
        """B from bias-corrected running averages of both estimates."""
        batch = float(self.trainer.config.batch_size)
        small_sq, big_sq = outputs.pop("noise/small_sq"), outputs.pop("noise/big_sq")
        grad_sq, trace = noise_scale_terms(small_sq, big_sq, batch / 2, batch)
        averages = self._averages.assign(
            DECAY * self._averages + (1 - DECAY) * tf.stack([grad_sq, trace, 1.0])
        )
        grad_sq_avg, trace_avg = averages[0] / averages[2], averages[1] / averages[2]
        # Unbiased estimates can come out negative while noise dominates: B is then unknown.
        known = (grad_sq_avg > 0) & (trace_avg > 0)
        outputs["noise_scale"] = tf.where(
            known, trace_avg / tf.where(known, grad_sq_avg, 1.0), float("nan")
        )
        outputs[GRAD_SQ] = grad_sq_avg
        outputs[TRACE] = trace_avg


def _halves(x: tf.Tensor, y: Any) -> list[tuple[tf.Tensor, Any]]:
    """The first and second half of a batch (targets may be a dict, for multi-task)."""
    half = tf.shape(x)[0] // 2
    return [
        (x[:half], tf.nest.map_structure(lambda t: t[:half], y)),
        (x[half:], tf.nest.map_structure(lambda t: t[half:], y)),
    ]
