"""α: where a step landed in its valley, from the loss and slope at both ends of the step
on the same batch (Cockpit's α; `measures.alpha`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from core.lazy import lazy_module
from core.training.instruments.instrument import Instrument, ReplicaStep
from core.training.instruments.measures import alpha, dot
from core.training.instruments.specs import ChartSpec, Line, LineChart

tf = lazy_module("tensorflow")  # TensorFlow when measuring, not when declaring

TERMS = ("f0", "f1", "df0", "df1")


class Alpha(Instrument):
    """−1: the step barely moved; 0: it landed at the floor; +1: it overshot to the
    mirror point."""

    name = "alpha"
    field_help = "Measure alpha, the step's landing point in its valley,"
    charts: ClassVar[Mapping[str, ChartSpec]] = {
        "alpha": LineChart(
            "α: where each step landed in its valley",
            help="Where each step lands along its own direction: about −1 barely moved, 0 "
            "hit the valley's floor, +1 jumped to the far side; mostly > 0 means the steps "
            "are too big.",
            lines=(Line("alpha", "α", markers=True, lines=False),),
            guides=(-1, 0, 1),
        )
    }
    metrics = ("alpha",)
    summed = frozenset(f"alpha/{term}" for term in TERMS)  # each replica's share of a sum

    def before_update(self, step: ReplicaStep) -> list[tf.Tensor]:
        return [tf.identity(v) for v in step.variables]

    def after_update(self, step: ReplicaStep, before: Any) -> None:
        assert step.computed is not None
        direction = [
            tf.convert_to_tensor(v) - b for v, b in zip(step.variables, before, strict=True)
        ]
        after = step.gradients(step.x, step.y)
        batch = float(self.trainer.config.batch_size)
        step.terms["alpha/f0"] = step.computed.sums["loss"] / batch
        step.terms["alpha/f1"] = after.sums["loss"] / batch
        step.terms["alpha/df0"] = dot(step.computed.grads, direction)
        step.terms["alpha/df1"] = dot(after.grads, direction)

    def finish(self, outputs: dict[str, tf.Tensor]) -> None:
        outputs["alpha"] = alpha(*(outputs.pop(f"alpha/{term}") for term in TERMS))
