"""Interleaved A/B measurement: how every comparison in the bench is measured.

This machine's absolute speed drifts (other processes, frequency scaling, caches), so two
things measured a minute apart cannot be compared. `interleave` alternates them, A B A B …,
so that both samples of a pair see the same conditions; it drops the first pairs as
warm-up (tracing, lazy allocation, cold caches) and summarizes with medians, which a few
disturbed samples cannot move far.

A sample is whatever one call of a sampler returns: seconds per call, steps per second,
any positive cost or rate, as long as A and B return the same kind.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

Sampler = Callable[[], float]

#: A spread of the pair ratios wider than this share of their median asks for more pairs.
WIDE = 0.10
#: At most this many times the pairs asked for, when their spread stays wide.
MORE = 3


@dataclass(frozen=True)
class Paired:
    """Samples of A and B taken alternately after the warm-up: `a[i]` ran just before `b[i]`."""

    a: tuple[float, ...]
    b: tuple[float, ...]

    @property
    def a_median(self) -> float:
        return statistics.median(self.a)

    @property
    def b_median(self) -> float:
        return statistics.median(self.b)

    @property
    def ratio(self) -> float:
        """The median over pairs of `a[i] / b[i]`.

        Each pair's ratio cancels the drift both of its samples saw, so this is steadier
        than `a_median / b_median` (which it need not equal).
        """
        return statistics.median(self.ratios)

    @property
    def ratios(self) -> tuple[float, ...]:
        """Each pair's `a[i] / b[i]`."""
        return tuple(a / b for a, b in zip(self.a, self.b, strict=True))

    @property
    def spread(self) -> tuple[float, float]:
        """The interquartile range of the pairs' ratios: where the middle half of them lie."""
        if len(self.a) < 2:
            return self.ratio, self.ratio
        low, _, high = statistics.quantiles(self.ratios, n=4, method="inclusive")
        return low, high

    @property
    def wide(self) -> bool:
        """Whether the spread is wider than `WIDE` of the ratio: more pairs would help."""
        low, high = self.spread
        return high - low > WIDE * self.ratio


def interleave(
    a: Sampler,
    b: Sampler,
    *,
    pairs: int,
    warmup: int = 1,
    settle: Callable[[], object] | None = None,
    most: int | None = None,
    judged: Callable[[Paired], bool] | None = None,
) -> Paired:
    """Calls `a`, `b`, `a`, `b`, … for `warmup + pairs` pairs; keeps the last `pairs`.
    Then takes more pairs, up to `most` kept in all (`MORE` × `pairs` by default; pass
    `pairs` for exactly that many), while they do not yet judge a target (`judged`, given
    one: e.g. whether their spread lies on one side of its bound), or, without one, while
    their ratios' spread is `wide`: a pair costs a figure's whole sample, so none is taken
    that cannot change what the figure says.

    `settle`, if given, is called before every sample, outside it: e.g. `gc.collect`, so
    that the garbage of earlier samples is not collected inside a later one.
    Raises `ValueError` unless `pairs >= 1` and `warmup >= 0`.
    """
    if pairs < 1 or warmup < 0:
        raise ValueError(f"need pairs >= 1 and warmup >= 0 (got {pairs}, {warmup})")
    most = MORE * pairs if most is None else max(most, pairs)
    kept_a: list[float] = []
    kept_b: list[float] = []
    for index in itertools.count():
        if index >= warmup + pairs:
            paired = Paired(tuple(kept_a), tuple(kept_b))
            done = judged(paired) if judged is not None else not paired.wide
            if done or len(kept_a) >= most:
                return paired
        if settle is not None:
            settle()
        sample_a = a()
        if settle is not None:
            settle()
        sample_b = b()
        if index >= warmup:
            kept_a.append(sample_a)
            kept_b.append(sample_b)
    raise AssertionError("unreachable")


def seconds_per_call(fn: Callable[[], object], calls: int = 1) -> Sampler:
    """A sampler that calls `fn` `calls` times and returns the mean seconds per call."""
    if calls < 1:
        raise ValueError(f"calls must be at least 1 (got {calls})")

    def sample() -> float:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - start) / calls

    return sample


def median_seconds(fn: Callable[[], object], *, runs: int, warmup: int = 1) -> float:
    """The median seconds of one call of `fn` over `runs` calls, after `warmup` calls.

    For absolute figures, which have nothing to be paired with.
    """
    if runs < 1 or warmup < 0:
        raise ValueError(f"need runs >= 1 and warmup >= 0 (got {runs}, {warmup})")
    for _ in range(warmup):
        fn()
    sample = seconds_per_call(fn)
    return statistics.median(sample() for _ in range(runs))
