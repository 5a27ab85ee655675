"""When a logged step also records the per-layer statistics: a budget, like checkpoints'.

The loss, the gradient norms, clipping and projection are cheap and logged at every
logged step. The per-layer statistics (step and parameter norms, update ratio, sparsity,
distance from the initial weights) read every variable once more, so they cost more on a
model of many variables. Unless a run sets `per_layer_every`, they are recorded as often
as keeps their cost within `BUDGET` of the training time, measured as the run trains: the
schedule times each logged step with them against the logged step just before it, and
spaces them so that the extra time of one, spread over the steps until the next, is at
most `BUDGET` of a step.

A step with them and one without are one trace (the statistics are a branch of the step,
taken as it runs: `LayerStatistics.when`), so spacing them costs no trace and pays in any
run: a budgeted run starts with them at its first logged step, then every
`FIRST_INTERVAL`-th while the first timings of each kind come in, then as the budget says.
"""

from __future__ import annotations

import collections
import math
import statistics
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from core.training.config import RunConfig

#: The share of a step's time that the per-layer statistics may take by default: the
#: checkpoints' share (`core.engine.checkpoints.BUDGET`). On the bench's 100-variable MLP
#: they add about 40% to a step, so they come every 20 steps or so.
BUDGET: Final = 0.02
#: The interval (in logged steps) while the first timings of the steps without the
#: statistics come in: a few of each kind are timed early.
FIRST_INTERVAL: Final = 4
#: Pairs timed, the latest: a step with the statistics and the logged step before it; the
#: interval follows the median of their extra shares. Pairs, not the latest steps of each
#: kind: contention (another process, a flush, a collection) comes in bursts, and a burst
#: that covered the 16 latest steps without them, 50 ms on the bench's 100-variable MLP,
#: took the interval from 30 steps to 1 while the steps with them, spread over the last
#: few hundred, did not see it. A burst covers both steps of a pair, or moves one pair.
WINDOW: Final = 16
#: Timings of each kind left out at first: the traces, and a warming step after them.
WARMUP: Final = 2
#: The interval grows as soon as the budget needs it to, but shrinks only when the budget's
#: is shorter by this factor or more, so that a noisy timing does not move it back and forth.
HYSTERESIS: Final = 1.5
#: The longest interval, in steps: a chart still gets a point every so often.
LONGEST: Final = 1000


class PerLayerSchedule:
    """Which logged steps carry the per-layer statistics (see the module docstring).

    Attributes:
        every: The interval in steps now: a multiple of `log_every`.
        budgeted: Whether the budget sets it (else the run's `per_layer_every` does).
    """

    def __init__(self, every: int | None, log_every: int, budget: float = BUDGET) -> None:
        self.log_every = log_every
        self.budget = budget
        self.budgeted = every is None
        self.every = log_every * FIRST_INTERVAL if every is None else every
        self._pairs: collections.deque[tuple[float, float]] = collections.deque(maxlen=WINDOW)
        self._before: float | None = None  # the last logged step without them, if unpaired
        self._seen = {True: 0, False: 0}
        self._first = True

    @property
    def budget_share(self) -> float | None:
        """The share of training time the statistics are held to; None when the run set
        their interval."""
        return self.budget if self.budgeted else None

    def due(self, step: int, *, last: bool = False) -> bool:
        """Whether logged step `step` records them: the first logged step asked about (a
        run's charts start with its first point), each multiple of the interval, and a
        run's `last` step (its final statistics are whole)."""
        first, self._first = self._first, False
        return first or last or step % self.every == 0

    def timed(self, seconds: float, *, per_layer: bool) -> bool:
        """Notes how long a logged step took, with the statistics or without; returns
        whether the interval changed."""
        self._seen[per_layer] += 1
        if not self.budgeted or self._seen[per_layer] <= WARMUP:
            return False
        if not per_layer:
            self._before = seconds
            return False
        if self._before is not None:
            self._pairs.append((seconds, self._before))
            self._before = None
        if len(self._pairs) < 3:
            return False
        wanted = self._budgeted_interval()
        if wanted == self.every or self.every > wanted > self.every / HYSTERESIS:
            return False
        self.every = wanted
        return True

    def _budgeted_interval(self) -> int:
        """The shortest interval that keeps the statistics within the budget, in whole
        logged steps."""
        # Each pair's extra time as a share of its step without them: a slower machine
        # slows both alike and leaves the share as it was.
        extra = statistics.median((w - b) / b if b > 0 else 0.0 for w, b in self._pairs)
        steps = max(extra, 0.0) / self.budget
        logged = max(1, math.ceil(steps / self.log_every - 1e-9))  # 2.0000000001 is 2
        return min(logged * self.log_every, max(LONGEST, self.log_every))


def per_layer_schedule(config: RunConfig) -> PerLayerSchedule:
    """A run's schedule: its `per_layer_every`; else every logged step when it logs less
    often than every step (an explicit `log_every` wins); else the budget's."""
    every = config.per_layer_every
    if every is None and config.log_every > 1:
        every = config.log_every
    return PerLayerSchedule(every, config.log_every)
