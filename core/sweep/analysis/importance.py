"""Which knobs matter: Optuna's importance evaluators (`optuna.importance`) on a study's
completed trials, each importance with a bootstrap interval that says whether it is real.

A knob's importance is the evaluator's on all the completed trials: exactly what
`optuna.importance.get_param_importances(study, evaluator=...)` returns for the same
study, so that the lab, Optuna and Optuna Dashboard rank the knobs alike. (It was once
the resamples' median, which on one study ranked learning_rate first where Optuna ranked
weight_decay first.) Its interval is the 5th to 95th percentile over `RESAMPLES`
bootstrap resamples, each the completed trials drawn with replacement, as many as there
are, evaluated with its own fixed seed: with a handful of trials, an importance of 0.4
whose interval is [0.0, 0.9] says "not known yet". An interval that misses its point
is widened to hold it: near 0 or 1 (a knob that decides everything, or nothing) the
resamples, with fewer distinct trials each, all fall short of what all the trials say.

A resample without variance, its trials all scored the same (one trial drawn four times,
say) or no knob taking two values in it, tells nothing of any knob, and fANOVA refuses it
("zero total variance in all trees"): it is skipped and counted. A study like that has no
importances, and says why (`Importances.untold`).

The lab's first evaluator (`DEFAULT`) is Optuna's default: PED-ANOVA, which
`get_param_importances` takes when given none (since Optuna 5) and Optuna Dashboard
draws. fANOVA, Optuna's default before, comes second, its forest seeded with `SEED`.

Cost (2 shared cores, 3 knobs, `RESAMPLES` = 16): fANOVA 0.5 s for 20 trials and 2.1 s
for 100, of which Optuna's full forest on all trials is a quarter; PED-ANOVA 0.05 s and
0.1 s (figure 21 of `make bench` measures it). The Sweep page
caches the answer until another trial completes.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np

from core.knobs import InvalidInput
from core.readable import number

if TYPE_CHECKING:
    import optuna

#: The evaluators by name, Optuna's default first, with the label a chart or summary
#: gives each.
METHODS: Final[dict[str, str]] = {"ped_anova": "PED-ANOVA", "fanova": "fANOVA"}
#: The evaluator `optuna.importance.get_param_importances` takes when given none (Optuna
#: 5's default, and Optuna Dashboard's): the one the CLI prints and the summary ranks by.
DEFAULT: Final = "ped_anova"
#: fANOVA's seed (PED-ANOVA draws nothing), and the resamples' first: a study's
#: importances are replayed.
SEED: Final = 0
#: Bootstrap resamples: the cap that keeps an update cheap enough to run live.
RESAMPLES: Final = 16
#: The interval's coverage: its ends are the 5th and 95th percentiles.
LEVEL: Final = 0.90
#: The fewest completed trials an importance is computed from.
MIN_TRIALS: Final = 4
#: A trial's state as a count of them reads ("1 failed"); the others by their own name.
STATE_WORDS: Final = {"COMPLETE": "with no finite value", "FAIL": "failed"}
#: The name of the in-memory studies the evaluators read (the trials' copy, and each
#: resample), thrown away once evaluated.
SCRATCH: Final = "optlab-importance-scratch"
#: The resamples' fANOVA forests: 16 trees of depth 16 instead of Optuna's 64 and 64, a
#: fifth of the cost (the spread between resamples dwarfs what fewer trees add). The
#: point value keeps Optuna's forest, so that it is Optuna's.
BOOTSTRAP_TREES: Final = 16
#: fANOVA's forest on all the trials: `FanovaImportanceEvaluator`'s defaults.
OPTUNA_TREES: Final = 64
#: What fANOVA raises for trials whose forest explains no variance.
_NO_VARIANCE: Final = "zero total variance"


class _Scratch(logging.Filter):
    """Drops Optuna's "A new study created in memory" line for each scratch study (one
    an evaluation: 17 an evaluator, each time the page's trials change), and nothing
    else."""

    def filter(self, record: logging.LogRecord) -> bool:
        return SCRATCH not in record.getMessage()


logging.getLogger("optuna.storages._in_memory").addFilter(_Scratch())


@dataclass(frozen=True)
class Importance:
    """A knob's share of the objective's variance by one evaluator (normalized: the
    knobs' sum to 1).

    Attributes:
        name: The knob.
        value: The evaluator's on all the completed trials (`get_param_importances`').
        low, high: The `LEVEL` interval over the resamples that had variance (widened to
            hold `value`); None when not bootstrapped, or when none had.
    """

    name: str
    value: float
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Importances:
    """What one evaluator tells of a study's knobs, and how it was found.

    Attributes:
        method: The evaluator, a key of `METHODS`.
        trials: The completed trials it read (those with a finite value).
        knobs: Each knob's importance, highest first; empty when `untold` says why.
        resamples: The bootstrap resamples drawn (0: no interval).
        skipped: How many of them had no variance, and were skipped.
        seed: fANOVA's seed on all the trials, and the first resample's.
        untold: Why no importance is told, as it ends "Which knobs matter is …" (too
            few trials; all scored the same); None when `knobs` are told.
    """

    method: str
    trials: int
    knobs: tuple[Importance, ...] = ()
    resamples: int = 0
    skipped: int = 0
    seed: int = SEED
    untold: str | None = None

    @property
    def evaluator(self) -> str:
        """The evaluator in words: `PED-ANOVA, Optuna's default evaluator`."""
        label = METHODS[self.method]
        if self.method == DEFAULT:
            return f"{label}, Optuna's default evaluator"
        return f"{label} with seed {self.seed}"

    def describe(self) -> str:
        """How the values were found: `PED-ANOVA, Optuna's default evaluator, on all 12
        trials; 90% intervals over 16 bootstrap resamples; 3 of 16 had no variance and
        were skipped`."""
        head = f"{self.evaluator}, on all {self.trials} trials"
        kept = self.resamples - self.skipped
        if self.resamples == 0:
            return f"{head}; no interval"
        if kept == 0:
            return f"{head}; no interval: all {self.resamples} bootstrap resamples had no variance"
        intervals = f"{head}; {LEVEL:.0%} intervals over {self.resamples} bootstrap resamples"
        if not self.skipped:
            return intervals
        was = "was" if self.skipped == 1 else "were"
        return f"{intervals}; {self.skipped} of {self.resamples} had no variance and {was} skipped"


def importances(
    study: optuna.Study, method: str = DEFAULT, resamples: int = RESAMPLES, seed: int = SEED
) -> Importances:
    """Each knob's importance by `optuna.importance`'s `PedAnovaImportanceEvaluator`
    ("ped_anova", Optuna's default) or `FanovaImportanceEvaluator` ("fanova", with
    Optuna's forest and seed `seed`), through `get_param_importances` on the completed
    trials, with the interval over `resamples` bootstrap resamples (none when 0),
    resample `i` drawn and evaluated with seed `seed + i`. None are told (`untold`)
    with fewer than `MIN_TRIALS` completed trials, or when they have no variance.
    Raises `InvalidInput` naming `method` or `resamples`."""
    if method not in METHODS:
        raise InvalidInput({"method": f"must be one of {', '.join(METHODS)} (got {method!r})"})
    if not isinstance(resamples, int) or not 0 <= resamples <= 1000:
        raise InvalidInput({"resamples": f"must be an integer in [0, 1000] (got {resamples!r})"})
    trials = _scored(study)

    def untold(why: str) -> Importances:
        return Importances(method, len(trials), resamples=resamples, seed=seed, untold=why)

    if len(trials) < MIN_TRIALS:
        return untold(_too_few(study, trials))
    if (flat := _without_variance(trials)) is not None:
        return untold(f"not told: {flat}")
    if len(alone := _varied(trials)) == 1:  # importances share 1 among the knobs varied
        only = f"{alone[0]} is the only knob varied, so it holds all the importance there is"
        return untold(f"not told: {only}; its slice shows how it matters")
    directions = list(study.directions)
    point = _evaluate(directions, trials, method, seed, OPTUNA_TREES)
    if point is None:
        return untold(f"not told: {METHODS[method]} found no variance the knobs explain")
    rng = np.random.default_rng(seed)
    drawn = []
    for i in range(resamples):
        sample = [trials[j] for j in rng.integers(len(trials), size=len(trials))]
        found = None
        if _without_variance(sample) is None:
            found = _evaluate(directions, sample, method, seed + i, BOOTSTRAP_TREES)
        if found is not None:
            drawn.append(found)
    tail = 100 * (1 - LEVEL) / 2
    knobs = []
    for name, value in point.items():
        low = high = None
        if drawn:
            spread = np.percentile([result.get(name, 0.0) for result in drawn], [tail, 100 - tail])
            low, high = min(float(spread[0]), value), max(float(spread[1]), value)
        knobs.append(Importance(name, value, low, high))
    knobs.sort(key=lambda item: (-item.value, item.name))
    return Importances(method, len(trials), tuple(knobs), resamples, resamples - len(drawn), seed)


def importance_lines(found: Importances) -> list[str]:
    """`importance NAME VALUE [LOW, HIGH]`, a line per knob as ranked."""
    return [
        f"importance {item.name} {item.value:.4f}"
        + ("" if item.low is None else f" [{item.low:.4f}, {item.high:.4f}]")
        for item in found.knobs
    ]


def _scored(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The trials Optuna's evaluators read: the completed ones with a finite value, in
    the study's order (a forest fitted to them in another order is another forest)."""
    if len(study.directions) != 1:
        return []
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    return [t for t in trials if t.value is not None and math.isfinite(t.value)]


def _too_few(study: optuna.Study, scored: Sequence[optuna.trial.FrozenTrial]) -> str:
    """Why there are too few trials to tell, counting the trials that do not count by
    state: "told once 4 trials complete with a value; 3 have (1 pruned, 1 running)"."""
    counted = {t.number for t in scored}
    others = Counter(
        STATE_WORDS.get(t.state.name, t.state.name.lower())
        for t in study.get_trials(deepcopy=False)
        if t.number not in counted
    )
    why = ", ".join(f"{n} {state}" for state, n in others.items())
    have = f"{len(scored)} {'has' if len(scored) == 1 else 'have'}"
    return f"told once {MIN_TRIALS} trials complete with a value; {have}" + (
        f" ({why})" if why else ""
    )


def _without_variance(trials: Sequence[optuna.trial.FrozenTrial]) -> str | None:
    """Why `trials` have no variance a knob could explain, or None: all scored the
    same (nothing to explain), or no knob took two values (nothing to explain it by)."""
    values = {t.value for t in trials}
    if len(values) == 1:
        return f"all {len(trials)} trials scored the same ({number(next(iter(values)))})"
    if not _varied(trials):
        return f"no knob took two values over the {len(trials)} trials"
    return None


def _varied(trials: Sequence[optuna.trial.FrozenTrial]) -> list[str]:
    """The knobs that took two values or more over `trials`."""
    names = dict.fromkeys(name for t in trials for name in t.params)
    return [name for name in names if len({t.params.get(name) for t in trials}) > 1]


def _evaluate(
    directions: list[optuna.study.StudyDirection],
    trials: Sequence[optuna.trial.FrozenTrial],
    method: str,
    seed: int,
    trees: int,
) -> dict[str, float] | None:
    """`get_param_importances` over `trials` alone, in a study of their own (in memory);
    None when fANOVA's forest explains no variance (every split it found leaves its
    prediction flat)."""
    import optuna

    sample = optuna.create_study(directions=directions, study_name=SCRATCH)
    sample.add_trials(trials)
    evaluator: optuna.importance.BaseImportanceEvaluator
    if method == "fanova":
        evaluator = optuna.importance.FanovaImportanceEvaluator(
            n_trees=trees, max_depth=trees, seed=seed
        )
    else:
        evaluator = optuna.importance.PedAnovaImportanceEvaluator()
    try:
        found = optuna.importance.get_param_importances(sample, evaluator=evaluator)
    except RuntimeError as error:
        if _NO_VARIANCE not in str(error):
            raise
        return None
    return {name: float(value) for name, value in found.items()}
