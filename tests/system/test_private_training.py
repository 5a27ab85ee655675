"""DP-SGD runs (issue 56) in the engine: a digits run at C = 1, σ = 1.1, δ = 1e-5 logs its
ε at every logged step, as `dp-accounting` counts it for its Poisson batches, and learns;
its start records n, q, the sampling and the accountant; a budget stops it before a step
would pass it; two replicas train it too; `optlab train` warns of a δ of at least 1/n."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from core.engine import Engine, RunConfig
from core.privacy.accounting import epsilon
from core.store import PRIVACY_BUDGET_EVENT
from core.training.private_run import EPSILON, PrivateRun
from tests import app_server
from tests.waiting import scaled

EXAMPLES = 1438  # digits' training split
PRIVATE = {
    "dataset": "digits",
    "model": "mlp",
    "optimizer": "adam",
    "hyperparameters": {"learning_rate": 0.003},
    "batch_size": 64,
    "epochs": 8,
    "dp_clip": 1.0,
    "dp_noise": 1.1,
    "dp_delta": 1e-5,
}


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    engine = Engine(tmp_path_factory.mktemp("private") / "lab.sqlite", max_concurrent=2)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def trained(engine: Engine) -> str:
    run_id = engine.start(RunConfig.from_dict(PRIVATE))
    assert engine.wait(run_id, scaled(300)).status == "completed"
    return run_id


def test_a_private_run_logs_its_epsilon_at_every_step_and_learns(
    engine: Engine, trained: str
) -> None:
    metrics = engine.metrics(trained)
    logged = np.isfinite(metrics["loss"])
    steps, spent = metrics.steps[logged], metrics[EPSILON][logged]
    assert list(steps) == list(range(1, 8 * (EXAMPLES // 64) + 1))  # every step logged
    assert np.isfinite(spent).all() and (np.diff(spent) >= 0).all()
    rate = 64 / EXAMPLES
    for step in (1, 10, int(steps[-1])):
        expected = epsilon(rate, 1.1, step, 1e-5, "rdp")
        assert spent[step - 1] == pytest.approx(expected, rel=1e-9)
    final = engine.store.get_run(trained).final_metrics
    assert final["val_accuracy"] > 0.6, final  # ten classes: chance is 0.1
    (start,) = [event for event in engine.store.events(trained, "init")]
    # What the start records (its fields are PrivateRun's, tested in its unit test).
    recorded = PrivateRun(RunConfig.from_dict(PRIVATE), EXAMPLES, len(steps)).record()
    assert start.payload["privacy"] == recorded and recorded["examples"] == EXAMPLES


def test_a_budget_stops_the_run_before_a_step_would_pass_it(engine: Engine) -> None:
    budget = 2.5  # ε(1) is 1.25 here: about 70 of its 176 steps
    run_id = engine.start(RunConfig.from_dict({**PRIVATE, "dp_epsilon_budget": budget}))
    status = engine.wait(run_id, scaled(300))
    assert status.status == "completed"
    metrics = engine.metrics(run_id)
    logged = np.isfinite(metrics[EPSILON])
    last = int(metrics.steps[logged][-1])
    assert metrics[EPSILON][logged][-1] <= budget
    assert epsilon(64 / EXAMPLES, 1.1, last + 1, 1e-5, "rdp") > budget  # the next passes it
    assert last < 8 * (EXAMPLES // 64)  # it stopped early
    (stop,) = engine.store.events(run_id, PRIVACY_BUDGET_EVENT)
    assert stop.step == last and stop.payload["last_step"] == last


def test_two_replicas_train_a_private_run(engine: Engine) -> None:
    config = RunConfig.from_dict({**PRIVATE, "strategy": "mirrored", "max_steps": 30})
    run_id = engine.start(config)
    assert engine.wait(run_id, scaled(300)).status == "completed"
    (start,) = engine.store.events(run_id, "init")
    assert start.payload["replicas"] == 2
    metrics = engine.metrics(run_id)
    assert list(metrics.steps[np.isfinite(metrics["loss"])]) == list(range(1, 31))


def test_the_cli_warns_of_a_delta_of_at_least_one_over_n_and_refuses_a_bad_clip(
    tmp_path: Path,
) -> None:
    store = str(tmp_path / "lab.sqlite")
    flags = ["--dataset", "digits", "--model", "mlp", "--max-steps", "3", "--store", store]
    run = subprocess.run(
        [sys.executable, "-m", "core", "train", *flags, "--dp-clip", "1", "--dp-delta", "0.01"],
        cwd=app_server.ROOT,
        capture_output=True,
        text=True,
        timeout=scaled(300),
    )
    assert run.returncode == 0, run.stderr
    assert "warning: dp_delta: 0.01 is not below 1/n = 1/1,438" in run.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "core", "train", *flags, "--dp-clip", "0"],
        cwd=app_server.ROOT,
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert bad.returncode == 2 and "dp_clip" in bad.stderr and "Traceback" not in bad.stderr
