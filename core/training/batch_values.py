"""Each batch's own loss and metrics in a `model.fit`, taken apart from Keras's running means.

Keras reports a fit's loss and metrics at each batch as means since the epoch began,
weighted by the batches' samples; the lab's own runs log each batch's value. A
`keras.metrics.Mean` (the loss tracker, accuracies, any `MeanMetricWrapper`) keeps its mean
as `total / count`, so a batch's own value is what the batch added to both:

    x_k = (total_k − total_{k−1}) / (count_k − count_{k−1})

exact for batches of any size (an epoch's last batch may be short), and Keras resets both
at each epoch's start. With `steps_per_execution` > 1 Keras calls back once per execution,
and the value is the mean over that execution's batches. A metric that is no such mean
(precision, AUC: a state that is not a sum) cannot be taken apart: it keeps Keras's value
under a name that says so (`SINCE_EPOCH_START`), so it is never drawn as a batch's value.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import keras

#: Appended to the name of a metric whose logged value is Keras's, since the epoch began.
SINCE_EPOCH_START = "_since_epoch_start"


class BatchValues:
    """Turns the logs of `model`'s fit into the values of one batch (see the module
    docstring): `before(batch)` ahead of a batch to be logged, `of(logs)` after it."""

    def __init__(self, model: keras.Model) -> None:
        self._model = model
        self._start: dict[str, tuple[float, float]] = {}

    def before(self, batch: int) -> None:
        """Notes the sums that batch `batch` of an epoch starts from (none for an epoch's
        first batch: Keras has just reset them)."""
        self._start = {} if batch == 0 else self._sums()

    def of(self, logs: Mapping[str, float]) -> dict[str, float]:
        """`logs` (Keras's, after the batch) with each mean replaced by the batch's own
        value, and any other metric renamed with `SINCE_EPOCH_START`."""
        sums = self._sums()
        values = {}
        for name, value in logs.items():
            if name not in sums:
                values[f"{name}{SINCE_EPOCH_START}"] = value
                continue
            total, count = sums[name]
            start_total, start_count = self._start.get(name, (0.0, 0.0))
            added = count - start_count
            values[name] = (total - start_total) / added if added > 0 else value
        return values

    def _sums(self) -> dict[str, tuple[float, float]]:
        """Each mean metric's (total, count), by the name Keras logs it under."""
        return {
            m.name: (float(m.total.numpy()), float(m.count.numpy())) for m in _means(self._model)
        }


def _means(model: keras.Model) -> Iterator[keras.metrics.Mean]:
    """The model's metrics that are weighted means, the compiled ones' inner metrics too."""
    pending: list[Any] = list(model.metrics)
    while pending:
        metric = pending.pop()
        if isinstance(metric, keras.metrics.Mean):
            yield metric
        else:  # a container (`CompileMetrics`, `CompileLoss`) or a metric of another kind
            pending.extend(getattr(metric, "metrics", ()))
