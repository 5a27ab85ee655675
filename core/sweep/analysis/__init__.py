"""What a sweep's trials say: which knobs matter (with an interval), where the best
trials lie, each trial's learning curve, and a short written summary of it all.

Every answer rests on Optuna's own computations (`optuna.importance`, the trials'
`FrozenTrial.intermediate_values` and distributions), read from an `optuna.Study`;
the figures of the same views are `core.charts.sweep_analysis`'s.

Modules: `trials` (the study from the store, and the trials an analysis reads),
`importance` (Optuna's PED-ANOVA and fANOVA on all trials, with bootstrap intervals),
`ranges` (the best quarter's range of each knob, and its search range's edges), `curves`
(learning curves, pruned trials marked), `summary` (the written summary). Importing this
package imports no Optuna.
"""

from core.sweep.analysis.curves import LearningCurve, learning_curves
from core.sweep.analysis.importance import (
    DEFAULT,
    METHODS,
    MIN_TRIALS,
    RESAMPLES,
    Importance,
    Importances,
    importance_lines,
    importances,
)
from core.sweep.analysis.ranges import KnobRange, best_quarter
from core.sweep.analysis.summary import summary_lines
from core.sweep.analysis.trials import completed, load_study

__all__ = [
    "DEFAULT",
    "METHODS",
    "MIN_TRIALS",
    "RESAMPLES",
    "Importance",
    "Importances",
    "KnobRange",
    "LearningCurve",
    "best_quarter",
    "completed",
    "importance_lines",
    "importances",
    "learning_curves",
    "load_study",
    "summary_lines",
]
