"""`PrivateRun`: a DP-SGD run's ε step by step, exact at its last step, and the last step
its budget allows; what its start records."""

from __future__ import annotations

import pytest

from core.privacy.accounting import epsilon
from core.training.config import RunConfig
from core.training.private_run import PrivateRun

BASE = {"dataset": "digits", "dp_clip": 1.0, "dp_noise": 1.1, "dp_delta": 1e-5}
EXAMPLES = 1438


@pytest.mark.slow  # PLD's exact ε at each of its grid's points: 20 s
def test_the_budgets_last_step_is_the_last_within_it_and_is_logged_exactly() -> None:
    config = RunConfig.from_dict({**BASE, "dp_epsilon_budget": 2.0, "dp_accountant": "pld"})
    run = PrivateRun(config, EXAMPLES, 176)
    q = 64 / EXAMPLES
    assert 0 < run.last_step < 176
    assert epsilon(q, 1.1, run.last_step, 1e-5, "pld") <= 2.0
    assert epsilon(q, 1.1, run.last_step + 1, 1e-5, "pld") > 2.0
    assert run.epsilon(run.last_step) == epsilon(q, 1.1, run.last_step, 1e-5, "pld")
    # Before it, PLD's grid: never below the step's own ε, never falling.
    logged = [run.epsilon(step) for step in range(1, run.last_step + 1)]
    assert logged == sorted(logged)
    for step in (1, 17, run.last_step // 2):
        assert run.epsilon(step) >= epsilon(q, 1.1, step, 1e-5, "pld")


def test_without_a_budget_every_step_is_allowed_and_the_record_says_the_setting() -> None:
    run = PrivateRun(RunConfig.from_dict(BASE), EXAMPLES, 176)
    assert run.last_step == 176
    assert run.epsilon(176) == pytest.approx(epsilon(64 / EXAMPLES, 1.1, 176, 1e-5, "rdp"))
    assert run.record() == {
        "examples": EXAMPLES,
        "rate": 64 / EXAMPLES,
        "sampling": "poisson",
        "accountant": "rdp",
        "delta": 1e-5,
        "noise_multiplier": 1.1,
        "clip": 1.0,
        "epsilon_budget": None,
        "last_step": 176,
    }
