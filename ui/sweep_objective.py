"""The Sweep form's objective: what scores a trial, and for time to target, the target.

The direction follows the objective (see `core.sweep.objective`); by default a sweep
takes its dataset's metric (validation accuracy, or a regression's MAE), so the box starts
there whichever dataset is picked. A choice the dataset has no metric for, or a target
out of range, is refused by `Sweep` naming `objective` or `target`, under the form.
"""

from __future__ import annotations

from typing import Any, Final

import streamlit as st

from core import data
from core.sweep.objective import OBJECTIVE_NAMES, PROBLEM_METRICS, TIME_TO_TARGET
from ui import state

#: How each choice reads in the box; None is the dataset's own metric.
LABELS: Final = {
    None: "the dataset's metric",
    "val_accuracy": "validation accuracy (higher is better)",
    "val_loss": "validation loss (lower is better)",
    "val_mae": "validation MAE, a regression's (lower is better)",
    TIME_TO_TARGET: "steps to reach a target (fewer is better)",
}


def settings(dataset_key: str) -> dict[str, Any]:
    """The objective box (and the target's, for time to target), as `Sweep` takes them,
    for the dataset the form's widget `dataset_key` holds."""
    metric = _metric(st.session_state[dataset_key])
    chosen = st.selectbox(
        "objective",
        (None, *OBJECTIVE_NAMES),
        format_func=lambda name: LABELS[name] + (f": {metric}" if name is None else ""),
        key="sweep:objective",
        persist_state=state.KEPT,
        help="What scores a trial; the search maximizes accuracy and minimizes the rest.",
    )
    target = None
    if chosen == TIME_TO_TARGET:
        target = st.number_input(
            f"target {metric} to reach",
            value=None,
            format="%g",
            key="sweep:target",
            placeholder="e.g. 0.9",
            persist_state=state.KEPT,
            help="A trial scores the first step at which its run validated at the target "
            f"or better ({metric}); a run that never reaches it fails its trial.",
        )
    return {"objective": chosen, "target": target}


def _metric(dataset: str) -> str:
    """The metric the dataset's problem logs (a classification's, for one not known)."""
    try:
        return PROBLEM_METRICS[data.dataset_catalog.info(dataset).problem]
    except ValueError:  # a file not readable here, say: the sweep names the field
        return PROBLEM_METRICS["classification"]
