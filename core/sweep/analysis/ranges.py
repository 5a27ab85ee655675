"""Where the best trials lie: for each knob, the range (or the choices) of the best
quarter of the completed trials, and whether they sit at an edge of the knob's search
range, which says to widen it.

A knob's search range is its Optuna distribution (`FrozenTrial.distributions`, over the
knobs every completed trial shares: `optuna.search_space.intersection_search_space`).
Positions in it are measured on the distribution's own scale, log₁₀ for a log one: the
best quarter sit at an edge when the best trial lies in the outer `EDGE` of the range and
the quarter's median in the outer `LEAN` on the same side. A value that keeps improving
toward one end (its best quarter evenly over the last quarter of the range, median 7/8)
says so; one best trial at an edge by chance, the others anywhere, does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

import numpy as np

from core.sweep.analysis.trials import completed

if TYPE_CHECKING:
    import optuna

#: The share of a search range, at each end, that counts as its edge.
EDGE: Final = 0.1
#: The share, at the same end, where the best quarter's median must lie too.
LEAN: Final = 0.25
#: The fewest best-quarter trials an edge is told from: one trial could sit anywhere.
EDGE_TRIALS: Final = 2


@dataclass(frozen=True)
class KnobRange:
    """A knob's search range and where in it the best quarter of trials lie.

    Attributes:
        name: The knob.
        low, high: The best quarter's lowest and highest value (numeric knobs; else None).
        choices: The choices the best quarter took, in the distribution's order
            (categorical knobs; else empty).
        search_low, search_high: The search range (numeric knobs; else None).
        log: Whether the search range is on a log scale.
        edge: "low" or "high" when the best quarter sit at that edge of the search
            range, else None.
    """

    name: str
    low: float | None
    high: float | None
    choices: tuple[str, ...]
    search_low: float | None
    search_high: float | None
    log: bool
    edge: Literal["low", "high"] | None


def best_quarter(study: optuna.Study) -> tuple[int, list[KnobRange]]:
    """How many trials make the best quarter of the completed ones (at least one), and
    each knob's `KnobRange` over them; (0, []) before any trial completes."""
    import optuna

    trials = completed(study)
    if not trials:
        return 0, []
    best = trials[: math.ceil(len(trials) / 4)]
    space = optuna.search_space.intersection_search_space(trials)
    return len(best), [_range(name, space[name], best) for name in space]


def _range(
    name: str,
    distribution: optuna.distributions.BaseDistribution,
    best: list[optuna.trial.FrozenTrial],
) -> KnobRange:
    """`name`'s `KnobRange` over the `best` trials, best first."""
    import optuna

    values = [t.params[name] for t in best]
    if isinstance(distribution, optuna.distributions.CategoricalDistribution):
        taken = [str(c) for c in distribution.choices if c in values]
        return KnobRange(name, None, None, tuple(taken), None, None, False, None)
    assert isinstance(
        distribution, optuna.distributions.FloatDistribution | optuna.distributions.IntDistribution
    )
    low, high, log = float(distribution.low), float(distribution.high), distribution.log
    edge: Literal["low", "high"] | None = None
    if high > low and len(best) >= EDGE_TRIALS:
        scale = np.log10 if log else np.asarray
        places = (scale(np.array(values, dtype=float)) - scale(low)) / (scale(high) - scale(low))
        first, middle = places[0], np.median(places)  # the best trial's; the quarter's
        if first <= EDGE and middle <= LEAN:
            edge = "low"
        elif first >= 1 - EDGE and middle >= 1 - LEAN:
            edge = "high"
    return KnobRange(name, float(min(values)), float(max(values)), (), low, high, log, edge)
