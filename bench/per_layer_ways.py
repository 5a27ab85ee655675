"""Four ways to measure each variable of a step: `python -m bench.per_layer_ways`

The per-layer statistics need, for each trainable variable, ‖w − w_before‖², ‖w‖², its
count of zeros and ‖w − w_initial‖². Measured are the ways to compute them in one traced
function, against one chain of ops per variable: all variables flattened into one vector
and summed per variable by `unsorted_segment_sum`; same-shape small tensors stacked for
each statistic (`transforms.per_tensor`, as the optimizer's step measures); and the lab's
way for the per-layer statistics, same-shape tensors of up to `STACKED_ONCE_AT_MOST`
entries stacked once for all four (`transforms.per_tensor_measures`, as
`core.training.telemetry` measures). Printed per model: ops in the graph, median µs per
call, and the ratio to the per-variable chains over interleaved pairs. All must agree
first.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from bench import models as bench_models
from bench.timing import interleave, seconds_per_call
from core import models
from core.optimizers import transforms
from core.training import telemetry
from core.training.telemetry import ZERO

MODELS = ("lenet", bench_models.DEEP_MLP, bench_models.DEEP_VIT)
# Ops that move no numbers: reads of the variables and constants, not measuring work.
BOOKKEEPING = {"ReadVariableOp", "Placeholder", "Const", "Identity", "NoOp"}

Way = Callable[[], list[tf.Tensor]]
STACKED_ONCE_AT_MOST = telemetry.STACKED_AT_MOST


def zeros(tensor: tf.Tensor, *, axis: list[int] | None) -> tf.Tensor:
    """How many entries lie below `ZERO` in magnitude (a `transforms.Measure`)."""
    return tf.reduce_sum(tf.cast(tf.abs(tensor) < ZERO, tf.float32), axis=axis)


def ways(
    variables: Sequence[tf.Variable], before: Sequence[tf.Tensor], initial: Sequence[tf.Tensor]
) -> dict[str, Way]:
    """The three ways, traced; each returns the four statistics as vectors over `variables`."""
    segments = tf.constant(
        np.repeat(np.arange(len(variables)), [v.shape.num_elements() for v in variables])
    )

    @tf.function(autograph=False)
    def per_variable() -> list[tf.Tensor]:
        now = [tf.convert_to_tensor(v) for v in variables]
        return [
            tf.stack([tf.reduce_sum(tf.square(w - b)) for w, b in zip(now, before, strict=True)]),
            tf.stack([tf.reduce_sum(tf.square(w)) for w in now]),
            tf.stack([zeros(w, axis=None) for w in now]),
            tf.stack([tf.reduce_sum(tf.square(w - i)) for w, i in zip(now, initial, strict=True)]),
        ]

    @tf.function(autograph=False)
    def segment_sums() -> list[tf.Tensor]:
        def flat(tensors: Sequence[tf.Tensor]) -> tf.Tensor:
            return tf.concat([tf.reshape(t, [-1]) for t in tensors], axis=0)

        def per(values: tf.Tensor) -> tf.Tensor:
            return tf.math.unsorted_segment_sum(values, segments, len(variables))

        now = flat(variables)
        return [
            per(tf.square(now - flat(before))),
            per(tf.square(now)),
            per(tf.cast(tf.abs(now) < ZERO, tf.float32)),
            per(tf.square(now - flat(initial))),
        ]

    @tf.function(autograph=False)
    def stacked() -> list[tf.Tensor]:
        now = [tf.convert_to_tensor(v) for v in variables]
        return [
            transforms.squared_distances(now, before),
            transforms.squared_norms(now),
            transforms.per_tensor(zeros, now),
            transforms.squared_distances(now, initial),
        ]

    def zeros_of(w: tf.Tensor, *_: tf.Tensor, axis: list[int] | None) -> tf.Tensor:
        return zeros(w, axis=axis)

    def squares_of(w: tf.Tensor, *_: tf.Tensor, axis: list[int] | None) -> tf.Tensor:
        return 2.0 * transforms.half_squares_measure(w, axis=axis)

    def moved(w: tf.Tensor, b: tf.Tensor, i: tf.Tensor, *, axis: list[int] | None) -> tf.Tensor:
        return 2.0 * transforms.half_distances_measure(w, b, axis=axis)

    def moved_from_initial(
        w: tf.Tensor, b: tf.Tensor, i: tf.Tensor, *, axis: list[int] | None
    ) -> tf.Tensor:
        return 2.0 * transforms.half_distances_measure(w, i, axis=axis)

    @tf.function(autograph=False)
    def stacked_once() -> list[tf.Tensor]:
        now = [tf.convert_to_tensor(v) for v in variables]
        found = transforms.per_tensor_measures(
            {"step": moved, "sq": squares_of, "zeros": zeros_of, "init": moved_from_initial},
            now,
            before,
            initial,
            stacked_at_most=STACKED_ONCE_AT_MOST,
        )
        return [found["step"], found["sq"], found["zeros"], found["init"]]

    return {
        "stacked once": stacked_once,
        "per variable": per_variable,
        "segment sums": segment_sums,
        "stacked by shape": stacked,
    }


def op_count(way: Way) -> int:
    """The ops of `way`'s graph that compute, not counting `BOOKKEEPING`."""
    graph = way.get_concrete_function().graph  # type: ignore[attr-defined]
    return sum(op.type not in BOOKKEEPING for op in graph.get_operations())


def check_agreement(found: dict[str, Way]) -> None:
    """Raises `AssertionError` unless every way gives the per-variable values (float32)."""
    reference = [t.numpy() for t in found["per variable"]()]
    for label, way in found.items():
        for expected, got in zip(reference, way(), strict=True):
            np.testing.assert_allclose(got.numpy(), expected, rtol=1e-4, atol=1e-6, err_msg=label)


def measure(name: str, *, calls: int, pairs: int) -> list[str]:
    """The table rows of one model: each way's ops, µs per call and ratio to per-variable."""
    model = models.build(name, input_shape=(28, 28, 1), num_classes=10, seed=0)
    variables = model.trainable_variables
    before = [tf.convert_to_tensor(v) * 0.99 for v in variables]
    initial = [tf.convert_to_tensor(v) * 1.01 for v in variables]
    found = ways(variables, before, initial)
    check_agreement(found)
    base = seconds_per_call(found["per variable"], calls)
    rows = [f"{name} ({len(variables)} variables)"]
    for label, way in found.items():
        paired = interleave(seconds_per_call(way, calls), base, pairs=pairs, most=pairs)
        rows.append(
            f"  {label:17s} {op_count(way):5d} ops  {paired.a_median * 1e6:8.1f} µs/call  "
            f"{paired.ratio:.2f}× ({paired.spread[0]:.2f}–{paired.spread[1]:.2f})"
        )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.per_layer_ways")
    parser.add_argument("--models", nargs="+", default=MODELS, metavar="MODEL")
    parser.add_argument("--calls", type=int, default=200, help="calls per sample")
    parser.add_argument("--pairs", type=int, default=9, help="interleaved pairs per way")
    args = parser.parse_args(argv)
    bench_models.register()
    for name in args.models:
        print("\n".join(measure(name, calls=args.calls, pairs=args.pairs)), flush=True)


if __name__ == "__main__":
    main()
