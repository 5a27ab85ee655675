"""Heat strips: per-layer histograms of gradient and weight magnitudes in fixed log bins
(`measures.magnitude_histogram`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from core.lazy import lazy_module
from core.training.instruments.instrument import Instrument, Measurements, ReplicaStep
from core.training.instruments.measures import histogram_edges, magnitude_histograms
from core.training.instruments.specs import ChartSpec, HeatStrip

tf = lazy_module("tensorflow")  # TensorFlow when measuring, not when declaring

KINDS = ("grad", "weight")


class Histogram(Instrument):
    """Counts of log₁₀|g| (the all-reduced gradient) and log₁₀|θ| (after the update)."""

    name = "histogram"
    field_help = "Record gradient and weight histograms per layer"
    charts: ClassVar[Mapping[str, ChartSpec]] = {
        "histogram/grad": HeatStrip(
            "Gradient magnitudes per layer",
            help="Gradient magnitudes per layer over time (colour: share of entries per power "
            "of ten): a band sliding to the bottom means vanishing gradients.",
            kind="grad",
        ),
        "histogram/weight": HeatStrip(
            "Weight magnitudes per layer",
            help="Weight magnitudes per layer over time: pruning and weight decay push mass "
            "to the bottom; exploding weights climb to the top.",
            kind="weight",
        ),
    }

    def before_update(self, step: ReplicaStep) -> None:
        assert step.computed is not None
        step.terms["histogram/grad"] = self._per_layer(step.all_reduced(step.computed.grads))

    def finish(self, outputs: dict[str, tf.Tensor]) -> None:
        outputs["histogram/weight"] = self._per_layer(self.trainer.model.trainable_variables)

    def read(self, outputs: Mapping[str, tf.Tensor], measured: Measurements) -> None:
        layers = self.trainer.layers
        measured.histograms = {"edges": histogram_edges().tolist()}
        for kind in KINDS:
            counts = outputs[f"histogram/{kind}"].numpy()
            measured.histograms[kind] = dict(zip(layers, counts.tolist(), strict=True))

    def _per_layer(self, tensors: list[Any]) -> tf.Tensor:
        """[layers, bins] magnitude histograms, each layer's variables together."""
        from core.training.telemetry import layer_of  # imports Keras: not when declaring

        layers = self.trainer.layers
        owners = [layers.index(layer_of(v.path)) for v in self.trainer.model.trainable_variables]
        return magnitude_histograms(tensors, owners, len(layers))
