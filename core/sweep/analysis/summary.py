"""A sweep's results in a few lines of text, for the Sweep page (under its charts) and
`optlab sweep --report`: the best configuration with its interval over seeds, the knobs
that matter in order, where the best quarter of trials lie, and which search ranges to
widen."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from core.readable import number
from core.sweep.analysis.importance import Importances
from core.sweep.analysis.ranges import KnobRange, best_quarter
from core.sweep.analysis.trials import completed
from core.sweep.objective import OBJECTIVE_ATTR, named
from core.sweep.trial_run import RUN_IDS, SPREAD

if TYPE_CHECKING:
    import optuna


def summary_lines(study: optuna.Study, found: Importances) -> list[str]:
    """The summary, a line per finding (markdown-safe plain text). `found`: the knobs'
    importances by one evaluator (`importances`), which the line on them names."""
    trials = completed(study)
    if not trials:
        return ["No trial has completed yet."]
    lines = [_best(study, trials[0]), _mattering(found)]
    quarter, ranges = best_quarter(study)
    where = "; ".join(f"{r.name} {_where(r)}" for r in ranges)
    lines.append(f"The best quarter ({quarter} of {len(trials)} completed trials) lie at: {where}.")
    edges = [r for r in ranges if r.edge is not None]
    lines += [
        f"Widen {r.name}: the best trials sit at the {r.edge} edge of its search range "
        f"{_number(r.search_low)}–{_number(r.search_high)}{' (log)' if r.log else ''}."
        for r in edges
    ] or ["No search range needs widening: the best trials sit inside every one."]
    return lines


def _best(study: optuna.Study, best: optuna.trial.FrozenTrial) -> str:
    """The best trial's value, with its 95% interval over the trial's seeds when it had
    several (`SweepPlan.repeats`: the trial's value is their mean)."""
    label = named(study.user_attrs.get(OBJECTIVE_ATTR)).label
    seeds = len(best.user_attrs.get(RUN_IDS) or [None])
    spread = best.user_attrs.get(SPREAD)
    assert best.value is not None
    if seeds > 1 and spread is not None:
        value = f"{number(best.value)} ± {number(spread)} (95% interval over {seeds} seeds)"
    else:
        value = f"{number(best.value)} (one seed: no interval; repeats over seeds give one)"
    settings = ", ".join(f"{k}={_number(v)}" for k, v in best.params.items())
    return f"Best {label}: {value}, trial {best.number}: {settings}."


def _mattering(found: Importances) -> str:
    if not found.knobs:
        return f"Which knobs matter is {found.untold}."
    ranked = ", ".join(
        f"{item.name} {item.value:.2f}"
        + (f" [{item.low:.2f}, {item.high:.2f}]" if item.low is not None else "")
        for item in found.knobs
    )
    return f"Knobs that matter, in order: {ranked} (importance by {found.describe()})."


def _where(knob: KnobRange) -> str:
    if knob.low is None:
        return "{" + ", ".join(knob.choices) + "}"
    if knob.low == knob.high:
        return _number(knob.low)
    return f"{_number(knob.low)}–{_number(knob.high)}"


def _number(value: Any) -> str:
    return number(value) if isinstance(value, float) else str(value)
