"""Checkpoints in real runs: a run resumed from one continues exactly as if it had never
stopped, for every kind of optimizer state; pausing saves one; a run keeps only its last
few; runs without checkpoints, or that ended otherwise, are refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from core.engine import Engine, RunConfig
from core.engine.checkpoints import KEEP, RunCheckpoints
from core.knobs import InvalidInput
from core.store import RESTORED_EVENT
from core.training.config import NOT_PRIVATE
from core.training.private_run import EPSILON
from tests.lean import NO_INSTRUMENTS
from tests.waiting import scaled, wait_for

BASE = {
    "dataset": "digits",
    "model": "mlp",
    "max_steps": 80,
    "log_every": 1,
    "checkpoint_every": 20,
    # Every instrument on, at intervals that straddle the checkpoints: their state too.
    "alpha_every": 7,
    "noise_scale_every": 3,
    "sharpness_every": 30,
    "histogram_every": 25,
}
# Each optimizer state a checkpoint must carry: noise drawn per step, top-k's error
# feedback, a projection, momentum with clipping and a scheduled rate, Adam's moments with
# decay, and under float16 loss scaling.
CASES = {
    "sgd_noise": {"optimizer": "sgd", "hyperparameters": {"noise_std": 0.05}},
    "top_k_feedback": {
        "optimizer": "adamw",
        "hyperparameters": {"top_k": 0.2, "top_k_error_feedback": True},
    },
    "projected_gd": {"optimizer": "projected_gd", "hyperparameters": {"radius": 8.0}},
    "nesterov_clip": {
        "optimizer": "momentum",
        "hyperparameters": {"nesterov": True, "clip_norm": 0.5, "learning_rate": 0.05},
        "lr_schedule": "cosine",
        "warmup_steps": 10,
    },
    # float16's loss scale and its count of finite steps, beside Adam's moments.
    "adam_float16": {"optimizer": "adam", "precision": "mixed_float16"},
    # DP-SGD: Poisson batches and noise drawn from the seed and the step; the instruments
    # that read the data beside the private gradient off, as DP-SGD requires.
    "dp_sgd": {
        "optimizer": "sgd",
        "dp_clip": 1.0,
        "dp_noise": 1.1,
        **{f"{name}_every": 0 for name in NOT_PRIVATE},
    },
}


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    engine = Engine(tmp_path_factory.mktemp("checkpoints") / "lab.sqlite", max_concurrent=2)
    yield engine
    engine.close()


def stopped_after(engine: Engine, config: RunConfig, step: int) -> str:
    """A run of `config`, stopped once it has passed `step`."""
    run_id = engine.start(config)
    wait_for(lambda: engine.status(run_id).step >= step, 120, f"step {step}", interval=0.002)
    engine.stop(run_id)
    status = engine.wait(run_id, scaled(60))
    assert status.status == "stopped", status
    return run_id


def checkpoints(engine: Engine, run_id: str) -> RunCheckpoints:
    return RunCheckpoints(engine.store.checkpoint_folder(run_id))


@pytest.fixture(scope="module")
def uninterrupted(engine: Engine) -> dict[str, str]:
    """Each case's run, trained without a stop: started at once, run two by two."""
    runs = {case: engine.start(RunConfig.from_dict({**BASE, **CASES[case]})) for case in CASES}
    for run_id in runs.values():
        assert engine.wait(run_id, scaled(300)).status == "completed"
    return runs


@pytest.mark.parametrize(
    ("case", "origin"), [*((case, "periodic") for case in CASES), ("sgd_noise", "stop")]
)
def test_a_resumed_run_continues_exactly(
    engine: Engine, uninterrupted: dict[str, str], case: str, origin: str
) -> None:
    """Resumed from the checkpoint its stop saved, or, as after a crash, from the last
    periodic one (the steps logged after it are trained and written again)."""
    config = RunConfig.from_dict({**BASE, **CASES[case]})
    whole = uninterrupted[case]
    resumed = stopped_after(engine, config, 45)
    saved = checkpoints(engine, resumed)
    stopped_at = engine.status(resumed).step
    assert saved.last().step == stopped_at  # stopping saves a checkpoint
    if origin == "periodic":
        for checkpoint in saved.list():
            if checkpoint.step % 20:
                saved._delete(checkpoint.step)
    start = saved.last().step
    assert start == (stopped_at if origin == "stop" else stopped_at // 20 * 20)

    engine.resume(resumed)
    assert engine.wait(resumed, scaled(120)).status == "completed"
    expected, got = engine.metrics(whole), engine.metrics(resumed)
    np.testing.assert_array_equal(got.steps, expected.steps)  # each step once
    keys = [
        key
        for key in ("loss", "accuracy", "grad_norm", "param_norm", "noise_scale", "alpha", EPSILON)
        if key in expected
    ]
    assert len(keys) == (5 if case == "dp_sgd" else 6)  # ε, or the two instruments
    for key in keys:
        np.testing.assert_allclose(got[key], expected[key], rtol=1e-6, err_msg=key)
    assert got["loss"][start] == expected["loss"][start]  # the first resumed step
    final, reference = (engine.store.get_run(r).final_metrics for r in (resumed, whole))
    assert final["steps"] == reference["steps"] == 80
    assert final["val_accuracy"] == reference["val_accuracy"]
    assert final["best_val_accuracy"] == reference["best_val_accuracy"]
    assert [e.step for e in engine.store.events(resumed, RESTORED_EVENT)] == [start]


def test_pausing_saves_a_checkpoint_and_resume_unpauses(engine: Engine) -> None:
    run_id = engine.start(RunConfig.from_dict({**BASE, "max_steps": 400}))
    engine.pause(run_id)  # pauses as it starts, at step 0: nothing to save yet
    wait_for(lambda: engine.status(run_id).status == "paused", 60, "paused at the start")
    assert checkpoints(engine, run_id).list() == []
    engine.resume(run_id)
    wait_for(lambda: engine.status(run_id).step >= 10, 60, "step 10")
    engine.pause(run_id)
    wait_for(lambda: engine.status(run_id).status == "paused", 60, "paused at step 10")
    paused_at = engine.status(run_id).step
    assert checkpoints(engine, run_id).last().step == paused_at
    engine.resume(run_id)
    assert engine.wait(run_id, scaled(120)).status == "completed"


def test_a_run_keeps_its_last_checkpoints(engine: Engine) -> None:
    run_id = engine.start(RunConfig.from_dict({**BASE, "max_steps": 60, "checkpoint_every": 5}))
    assert engine.wait(run_id, scaled(120)).status == "completed"
    # The last KEEP, and the first at or after 1, 2, 5, 10, 20, 50 steps (see `spread`).
    kept = [c.step for c in checkpoints(engine, run_id).list()]
    assert kept == sorted({5, 10, 20, 50, *range(60 - 5 * (KEEP - 1), 61, 5)})


def test_what_cannot_be_resumed_is_refused(engine: Engine) -> None:
    completed = engine.start(RunConfig.from_dict({**BASE, "max_steps": 5}))
    engine.wait(completed, scaled(60))
    with pytest.raises(InvalidInput, match="completed: nothing to resume"):
        engine.resume(completed)
    config = RunConfig.from_dict({**BASE, "max_steps": 2000, "checkpoint_every": 0})
    never = stopped_after(engine, config, 5)
    with pytest.raises(InvalidInput, match="no checkpoint to resume from"):
        engine.resume(never)
    assert not Path(engine.store.checkpoint_folder(never)).exists()
    assert engine.status(never).status == "stopped"


def test_a_fork_branches_from_its_parents_checkpoint(engine: Engine) -> None:
    config = RunConfig.from_dict({**BASE, "checkpoint_every": 10, **CASES["top_k_feedback"]})
    parent = engine.start(config)
    wait_for(
        lambda: any(c.step == 20 for c in checkpoints(engine, parent).list()),
        120,
        "a checkpoint of step 20",
    )
    same = engine.fork(parent, 20)  # while the parent trains on
    halved = engine.fork(parent, 20, learning_rate=0.0005, max_steps=100, name="halved")
    for run_id in (parent, same, halved):
        assert engine.wait(run_id, scaled(120)).status == "completed"

    expected, got = engine.metrics(parent), engine.metrics(same)
    assert got.steps.tolist() == list(range(21, 81))
    np.testing.assert_array_equal(got["loss"], expected["loss"][20:])  # the same future
    record = engine.store.get_run(halved)
    assert (record.parent, record.forked_at, record.name) == (parent, 20, "halved")
    assert record.config["hyperparameters"]["learning_rate"] == 0.0005
    (change,) = [e for e in engine.events(halved) if e.kind == "knob"]
    assert change.step == 21 and change.payload == {
        "name": "learning_rate",
        "value": 0.0005,
        "previous": 0.001,
    }
    assert engine.metrics(halved).steps[-1] == 100
    # The parent keeps the checkpoint its forks came from (20), beside its last KEEP and
    # its history (10, 20, 50).
    kept = [c.step for c in checkpoints(engine, parent).list()]
    assert kept == sorted({10, 20, 50, *range(80 - 10 * (KEEP - 1), 81, 10)})


def test_a_long_run_can_be_forked_from_early_on(engine: Engine) -> None:
    quick = {"telemetry": False, **NO_INSTRUMENTS, "log_every": 50, "val_every": 5000}
    config = {**BASE, **quick, "epochs": 1000, "max_steps": 10_000, "checkpoint_every": 200}
    parent = engine.start(RunConfig.from_dict(config))
    assert engine.wait(parent, scaled(600)).status == "completed"
    assert [c.step for c in checkpoints(engine, parent).list()] == [
        200,
        600,
        1000,
        2000,
        5000,
        9600,
        9800,
        10000,
    ]
    # What if at step 1,000 ...? The same future, with no change.
    same = engine.fork(parent, 1000)
    wait_for(lambda: (engine.status(same).step or 0) >= 1500, 120, "the fork's step 1,500")
    engine.stop(same)
    engine.wait(same, scaled(60))
    expected, got = engine.metrics(parent), engine.metrics(same)
    common = np.intersect1d(got.steps, expected.steps)
    assert common[0] == 1050 and common[-1] >= 1500
    np.testing.assert_array_equal(
        got["loss"][np.isin(got.steps, common)], expected["loss"][np.isin(expected.steps, common)]
    )


def test_a_fork_refuses_what_its_checkpoint_cannot_take(engine: Engine) -> None:
    parent = engine.start(RunConfig.from_dict({**BASE, "max_steps": 20, "checkpoint_every": 10}))
    engine.wait(parent, scaled(60))
    with pytest.raises(InvalidInput) as refused:
        engine.fork(parent, 10, model="lenet", radius=2.0, max_steps=10, beta_1=0.5)
    assert set(refused.value.errors) == {"model", "radius", "max_steps", "beta_1"}
    with pytest.raises(InvalidInput, match="no checkpoint of step 15"):
        engine.fork(parent, 15)
    assert [run.parent for run in engine.list()].count(parent) == 0


def test_a_checkpoint_is_never_ahead_of_the_stored_metrics(tmp_path: Path) -> None:
    """Metrics are flushed every half second, checkpoints come at their own steps: each
    checkpoint first stores the metrics up to it, so a process lost just after it (a
    node of a cluster) leaves no gap before a resume from it."""
    from core.store import Store

    engine = Engine(Store(tmp_path / "lab.sqlite", flush_interval=3600.0), max_concurrent=1)
    try:
        run_id = engine.start({**BASE, "max_steps": None, "epochs": 10_000, "checkpoint_every": 5})
        wait_for(lambda: engine.checkpoints(run_id), 60, "a checkpoint")
        first = engine.checkpoints(run_id)[0].step
        assert (engine.store.last_step(run_id) or 0) >= first
        engine.stop(run_id)
        engine.wait(run_id, scaled(60))
    finally:
        engine.close()
