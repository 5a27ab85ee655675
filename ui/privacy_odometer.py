"""A DP-SGD run's privacy odometer on Live: ε spent so far at the run's δ, read from its
logged `dp_epsilon` (`core.training.private_run`), and how much of its budget that is."""

from __future__ import annotations

import math

import numpy as np
import streamlit as st

from core.engine import RunStatus
from core.engine.api import Runs
from core.readable import number
from core.training.private_run import EPSILON

RECENT_STEPS = 50  # read back from the last logged step: the last ε is among them


def spent(engine: Runs, run_id: str) -> float | None:
    """The run's last logged ε, None before its first."""
    last = engine.last_logged_step(run_id)
    if last is None:
        return None
    recent = engine.metrics(run_id, since_step=max(0, last - RECENT_STEPS))
    if EPSILON not in recent:
        return None
    values = recent[EPSILON][np.isfinite(recent[EPSILON])]
    return float(values[-1]) if len(values) else None


def odometer(engine: Runs, run: RunStatus) -> None:
    """ε spent at δ, with its budget's share as a bar; nothing for a run without DP-SGD."""
    config = run.config
    if config.get("dp_clip") is None:
        return
    epsilon = spent(engine, run.id)
    delta, budget = config.get("dp_delta"), config.get("dp_epsilon_budget")
    said = (
        f"(ε, δ)-DP with δ = {number(delta)}, counted by {str(config.get('dp_accountant')).upper()}"
        f" for Poisson sampling at q = batch / n; clip C = {number(config.get('dp_clip'))}, "
        f"noise σ = {number(config.get('dp_noise'))}."
    )
    st.metric("privacy spent, ε", number(epsilon, 3), help=said, border=True)  # None: "–"
    if budget is not None and epsilon is not None and math.isfinite(epsilon):
        share = min(epsilon / budget, 1.0)
        st.progress(share, text=f"{share:.0%} of the budget ε = {number(budget)}")
