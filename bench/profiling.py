"""Where the time goes: TensorFlow op time by op type, and Python time by function.

Used to explain a figure that misses its target, from a profile rather than a guess:
`tf_ops` runs a traced function under `tf.profiler` and sums the time of every op it
executed by op type (`Mul`, `AssignVariableOp`, …); `python_hotspots` runs plain Python
under `cProfile` and names the functions that spend the most time themselves.
"""

from __future__ import annotations

import collections
import cProfile
import pstats
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# An op's trace event is named "scope/op_name:OpType"; runtime events contain spaces or
# "::" ("ExecutorState::Process", "EagerLocalExecute: …") and do not match.
_OP_EVENT = re.compile(r"^[^\s:]+:(\w+)$")


@dataclass(frozen=True)
class OpProfile:
    """Where one call's op time goes, from a profile over several calls.

    Op counts are not kept: once a function has run many times, TensorFlow's executor
    runs its cheapest ops inline without a trace event, so counts vary while times do not.

    Attributes:
        seconds: Op type → seconds of op time per call, summed over the threads that ran
            ops (so the total can exceed the call's wall time).
    """

    seconds: dict[str, float]

    @property
    def total(self) -> float:
        """Seconds of op time per call."""
        return sum(self.seconds.values())

    def summary(self, top: int = 4) -> str:
        """E.g. `"19.1 ms of op time: Neg 22%, AddV2 20%, Square 16%, Mul 14%"`: the `top`
        op types by time, leaving out those under 1%."""
        ranked = sorted(self.seconds.items(), key=lambda item: -item[1])[:top]
        shares = ", ".join(
            f"{op} {seconds / self.total:.0%}"
            for op, seconds in ranked
            if seconds >= 0.01 * self.total
        )
        return f"{self.total * 1e3:.1f} ms of op time: {shares}"

    def excess_over(self, other: OpProfile, top: int = 4) -> str:
        """E.g. `"+0.31 ms: Sum +0.12 ms, Sqrt +0.08 ms"`: how much more op time a call
        spends than one of `other`, and the `top` op types that spend the most more."""
        more = {
            op: seconds - other.seconds.get(op, 0.0)
            for op, seconds in self.seconds.items()
            if seconds > other.seconds.get(op, 0.0)
        }
        ranked = sorted(more.items(), key=lambda item: -item[1])[:top]
        ops = ", ".join(f"{op} +{seconds * 1e3:.2f} ms" for op, seconds in ranked)
        return f"{(self.total - other.total) * 1e3:+.2f} ms: {ops}"


def tf_ops(fn: Callable[[], object], calls: int) -> OpProfile:
    """Profiles `calls` calls of `fn` (warm: call it once before) with `tf.profiler`."""
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    with tempfile.TemporaryDirectory() as folder:
        tf.profiler.experimental.start(folder)
        try:
            for _ in range(calls):
                fn()
        finally:
            tf.profiler.experimental.stop()
        space = xplane_pb2.XSpace()
        for path in Path(folder).rglob("*.xplane.pb"):
            space.MergeFromString(path.read_bytes())
    seconds: collections.Counter[str] = collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                match = _OP_EVENT.match(plane.event_metadata[event.metadata_id].name)
                if match:
                    seconds[match.group(1)] += event.duration_ps * 1e-12 / calls
    return OpProfile(dict(seconds))


def python_hotspots(fn: Callable[[], object], top: int = 3) -> str:
    """Profiles one call of `fn` with `cProfile`; names the `top` functions by own time.

    E.g. `"_line (charts.py) 31%, downsample (series.py) 22%, … of 180 ms"`.
    """
    profiler = cProfile.Profile()
    profiler.runcall(fn)
    stats = pstats.Stats(profiler).stats  # (file, line, name) → (cc, nc, tottime, cumtime, …)
    total = sum(entry[2] for entry in stats.values())
    ranked = sorted(stats.items(), key=lambda item: -item[1][2])[:top]
    names = ", ".join(
        f"{_where(file, name)} {entry[2] / total:.0%}" for (file, _, name), entry in ranked
    )
    return f"{names} of {total * 1e3:.0f} ms"


def _where(file: str, name: str) -> str:
    # cProfile files built-ins under "~", with a name that says what they are.
    return name if file == "~" else f"{name} ({Path(file).name})"
