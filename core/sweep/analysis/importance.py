"""Which knobs matter: Optuna's importance evaluators (`optuna.importance`), run on
bootstrap resamples of the completed trials, so that each importance comes with an
interval that says whether it is real.

A knob's importance is the median over `RESAMPLES` resamples (each the completed trials
drawn with replacement, as many as there are, evaluated with its own fixed seed), its
interval the 5th to 95th percentile: with a handful of trials, an importance of 0.4 whose
interval is [0.0, 0.9] says "not known yet".

Cost (2 shared cores, 3 knobs, `RESAMPLES` = 16, reduced forests): fANOVA 0.6 s for 20
trials and 1.7 s for 100; PED-ANOVA 0.05 s and 0.1 s (`test_importance_cost_for_20_and_
100_trials_stays_live` measures it). The Sweep page caches the answer until another trial
completes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

import numpy as np

from core.knobs import InvalidInput
from core.sweep.analysis.trials import completed

if TYPE_CHECKING:
    import optuna

Method = Literal["fanova", "ped_anova"]
#: The evaluators, by name, with the label a chart or summary gives each.
METHODS: Final[dict[str, str]] = {"fanova": "fANOVA", "ped_anova": "PED-ANOVA"}
#: Bootstrap resamples: the cap that keeps an update cheap enough to run live.
RESAMPLES: Final = 16
#: The interval's coverage: its ends are the 5th and 95th percentiles.
LEVEL: Final = 0.90
#: The fewest completed trials an importance is computed from.
MIN_TRIALS: Final = 4
#: The name of each resample's study (in memory, thrown away once evaluated).
RESAMPLE: Final = "optlab-bootstrap-resample"
#: The resamples' fANOVA forests: 16 trees of depth 16 instead of Optuna's 64 and 64, a
#: fifth of the cost (the spread between resamples dwarfs what fewer trees add).
BOOTSTRAP_TREES: Final = 16


class _Resamples(logging.Filter):
    """Drops Optuna's "A new study created in memory" line for each resample's study
    (16 lines a refresh of the page), and nothing else."""

    def filter(self, record: logging.LogRecord) -> bool:
        return RESAMPLE not in record.getMessage()


logging.getLogger("optuna.storages._in_memory").addFilter(_Resamples())


@dataclass(frozen=True)
class Importance:
    """A knob's share of the objective's variance by one evaluator.

    Attributes:
        name: The knob.
        value: The median over the resamples (normalized: each resample's sum to 1).
        low, high: The `LEVEL` interval over the resamples; None when not bootstrapped.
    """

    name: str
    value: float
    low: float | None = None
    high: float | None = None


def importances(
    study: optuna.Study, method: str = "fanova", resamples: int = RESAMPLES, seed: int = 0
) -> list[Importance]:
    """Each knob's importance, highest first, by `optuna.importance`'s
    `FanovaImportanceEvaluator` ("fanova") or `PedAnovaImportanceEvaluator`
    ("ped_anova") through `get_param_importances`: on the completed trials once (no
    interval) when `resamples` is 0, else the median and interval over `resamples`
    bootstrap resamples, resample `i` drawn and evaluated with seed `seed + i`. Empty
    with fewer than `MIN_TRIALS` completed trials. Raises `InvalidInput` naming `method`
    or `resamples`."""
    if method not in METHODS:
        raise InvalidInput({"method": f"must be one of {', '.join(METHODS)} (got {method!r})"})
    if not isinstance(resamples, int) or not 0 <= resamples <= 1000:
        raise InvalidInput({"resamples": f"must be an integer in [0, 1000] (got {resamples!r})"})
    trials = completed(study)
    if len(trials) < MIN_TRIALS:
        return []
    if resamples == 0:
        single = _evaluate(study, trials, method, seed, bootstrap=False)
        ranked = sorted(single.items(), key=lambda item: -item[1])
        return [Importance(name, value) for name, value in ranked]
    rng = np.random.default_rng(seed)
    results = [
        _evaluate(study, [trials[j] for j in rng.integers(len(trials), size=len(trials))],
                  method, seed + i, bootstrap=True)
        for i in range(resamples)
    ]  # fmt: skip
    names = list(dict.fromkeys(name for result in results for name in result))
    tail = 100 * (1 - LEVEL) / 2
    found = []
    for name in names:
        values = np.array([result.get(name, 0.0) for result in results])
        low, median, high = np.percentile(values, [tail, 50, 100 - tail])
        found.append(Importance(name, float(median), float(low), float(high)))
    return sorted(found, key=lambda item: (-item.value, item.name))


def importance_lines(found: Sequence[Importance]) -> list[str]:
    """`importance NAME VALUE [LOW, HIGH]`, a line per knob as ranked."""
    return [
        f"importance {item.name} {item.value:.4f}"
        + ("" if item.low is None else f" [{item.low:.4f}, {item.high:.4f}]")
        for item in found
    ]


def _evaluate(
    study: optuna.Study,
    trials: Sequence[optuna.trial.FrozenTrial],
    method: str,
    seed: int,
    *,
    bootstrap: bool,
) -> dict[str, float]:
    """`get_param_importances` over `trials` alone, in a study of their own (in memory)."""
    import optuna

    sample = optuna.create_study(directions=list(study.directions), study_name=RESAMPLE)
    sample.add_trials(trials)
    evaluator: optuna.importance.BaseImportanceEvaluator
    if method == "fanova":
        trees = BOOTSTRAP_TREES if bootstrap else 64
        evaluator = optuna.importance.FanovaImportanceEvaluator(
            n_trees=trees, max_depth=trees, seed=seed
        )
    else:
        evaluator = optuna.importance.PedAnovaImportanceEvaluator()
    found = optuna.importance.get_param_importances(sample, evaluator=evaluator, normalize=True)
    return {name: float(value) for name, value in found.items()}
