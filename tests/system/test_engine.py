"""The engine: run lifecycle and every state, the queue, latency of stop and pause,
divergence, determinism across threads, live knob changes, strategies, learning quality."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

import numpy as np
import pytest

from core.engine import Engine, RunConfig
from core.optimizers import InvalidHyperparameters
from core.store import PER_LAYER_EVENT
from core.training.per_layer_schedule import BUDGET
from tests.threads import new_threads
from tests.waiting import holds_for, scaled, wait_for

# Small and fast: 8×8 digits, 22 steps per epoch at batch 64.
FAST = {
    "dataset": "digits",
    "model": "mlp",
    "optimizer": "sgd",
    "hyperparameters": {"learning_rate": 0.1},
}


def config(**changes) -> RunConfig:
    return RunConfig.from_dict({**FAST, **changes})


@pytest.fixture
def engine(tmp_path):
    engine = Engine(tmp_path / "lab.sqlite", max_concurrent=2)
    yield engine
    engine.close()


def test_a_run_completes_with_its_telemetry(engine) -> None:
    run_id = engine.start(
        config(
            max_steps=40,
            log_every=5,
            hyperparameters={"learning_rate": 0.1, "radius": 30.0, "clip_norm": 5.0},
        )
    )
    status = engine.wait(run_id, scaled(120))
    assert status.status == "completed" and status.step == status.total_steps == 40
    metrics = engine.metrics(run_id)
    assert metrics.steps.tolist() == [5, 10, 15, 20, 22, 25, 30, 35, 40]  # 22: epoch end
    for key in (
        "loss",
        "accuracy",
        "learning_rate",
        "grad_norm",
        "grad_norm_clipped",
        "clip_active",
        "param_norm",
        "projection_active",
        "radius",
        "clip_norm",
        "epoch",
        "val_loss",
        "val_accuracy",
        "step_norm/dense1",
        "param_norm/dense1",
        "update_ratio/logits",
        "sparsity/dense2",
    ):
        assert key in metrics, key
    assert np.all(metrics["param_norm"][~np.isnan(metrics["param_norm"])] <= 30.0 * 1.00001)
    val = metrics["val_accuracy"]
    assert metrics.steps[~np.isnan(val)].tolist() == [22, 40]
    assert metrics["loss"][-1] < metrics["loss"][0]
    final = status.final_metrics
    assert final["steps"] == 40 and final["best_val_accuracy"] > 0.5
    # Instruments left at their defaults measure about 20 times a run, on logged steps.
    kinds = [e.kind for e in engine.events(run_id)]
    assert kinds == ["init", "per_layer_interval"] + ["histogram"] * 8
    # An explicit log_every wins over the per-layer budget: every logged step has them.
    assert engine.events(run_id)[1].payload == {"every": 5, "budget": None}
    logged = metrics.steps[~np.isnan(metrics["step_norm/dense1"])].tolist()
    assert logged == [5, 10, 15, 20, 25, 30, 35, 40]
    assert metrics.steps[~np.isnan(metrics["alpha"])].tolist() == [5, 10, 15, 20, 25, 30, 35, 40]
    assert engine.metrics(run_id, since_step=30).steps.tolist() == [35, 40]


def test_the_budget_spaces_per_layer_statistics_from_a_runs_start(engine) -> None:
    # A step without them costs no trace of its own, so even a short run spaces them.
    short, long = (engine.start(config(max_steps=n, epochs=1000, seed=n)) for n in (20, 400))
    for run_id in (short, long):
        assert engine.wait(run_id, scaled(600)).status == "completed"

    def carried(run_id: str) -> list[int]:
        metrics = engine.metrics(run_id)
        return metrics.steps[~np.isnan(metrics["step_norm/dense1"])].tolist()

    def intervals(run_id: str) -> list[int]:
        return [e.payload["every"] for e in engine.events(run_id) if e.kind == PER_LAYER_EVENT]

    # The first logged step, then every fourth while the first timings come in; the last.
    assert carried(short)[:3] == [1, 4, 8] and carried(short)[-1] == 20
    assert len(carried(short)) < 20 and intervals(short)[0] == 4
    spaced = carried(long)  # then as the budget says
    assert spaced[0] == 1 and spaced[-1] == 400 and len(spaced) < 400
    budgets = {e.payload["budget"] for e in engine.events(long) if e.kind == PER_LAYER_EVENT}
    assert budgets == {BUDGET}


def test_telemetry_off_records_only_the_essentials(engine) -> None:
    run_id = engine.start(config(max_steps=10, telemetry=False))
    engine.wait(run_id, scaled(60))
    assert not [e for e in engine.events(run_id) if e.kind == PER_LAYER_EVENT]
    assert set(engine.metrics(run_id).keys) == {
        "loss",
        "accuracy",
        "learning_rate",
        "wall_time",
        "epoch",
        "val_loss",
        "val_accuracy",
    }


def test_queue_is_fifo_and_at_most_two_train_at_once(tmp_path) -> None:
    engine = Engine(tmp_path / "lab.sqlite", max_concurrent=2)
    try:
        # Different lengths, so the queued runs start at clearly different times.
        lengths = [20, 80, 20, 20]
        ids = [
            engine.start(config(max_steps=n, seed=i, log_every=20)) for i, n in enumerate(lengths)
        ]
        most = 0

        def ended() -> bool:  # the most that trained at once, seen on the way
            nonlocal most
            statuses = [run.status for run in engine.list()]  # one snapshot of all four
            most = max(most, statuses.count("running") + statuses.count("paused"))
            return not any(engine.status(r).active for r in ids)

        wait_for(ended, 120, "the four runs to end", interval=0.01)
        assert most == 2
        starts = [engine.status(r).started for r in ids]
        # The first two start together, in either order; the queued ones after them, in turn.
        assert max(starts[:2]) <= starts[2] <= starts[3]
        assert all(engine.status(r).status == "completed" for r in ids)
    finally:
        engine.close()


def test_a_milestone_is_a_stored_validation_or_a_runs_end(tmp_path) -> None:
    engine = Engine(tmp_path / "lab.sqlite", max_concurrent=1)
    try:
        engine.wait_for_milestone(0, 0.01)  # none yet: it waits out its timeout
        assert engine.milestones == 0
        queued = engine.start(config(max_steps=10))  # stopped before it starts: it ends
        engine.stop(queued)
        engine.wait_for_milestone(0, 600)
        assert engine.milestones == 1
        # Validated at steps 10, 20 and 30 (its last), then ended: four more.
        run_id = engine.start(config(max_steps=30, val_every=10, log_every=30))
        seen, stored = 1, []
        while seen < 5:
            engine.wait_for_milestone(seen, 600)
            seen = engine.milestones
            validated = engine.store.read_metrics(run_id)["val_accuracy"]
            stored.append((seen - 1, int(np.isfinite(validated).sum())))
        # Each validation was in the store when its milestone woke the waiter.
        assert all(count >= min(reached, 3) for reached, count in stored), stored
        assert engine.milestones == 5 and engine.wait(run_id, scaled(600)).status == "completed"
    finally:
        engine.close()


def test_waiting_for_a_milestone_wakes_and_fails_when_the_engine_closes(tmp_path) -> None:
    engine = Engine(tmp_path / "lab.sqlite")
    raised: list[BaseException] = []

    def wait() -> None:
        try:
            engine.wait_for_milestone(0, 600)
        except RuntimeError as exc:
            raised.append(exc)

    waiting = threading.Thread(target=wait)
    waiting.start()
    engine.close()
    waiting.join(scaled(600))
    assert not waiting.is_alive() and "closed" in str(raised[0])


def test_queued_run_can_be_stopped_before_it_starts(tmp_path) -> None:
    engine = Engine(tmp_path / "lab.sqlite", max_concurrent=1)
    try:
        first = engine.start(config(max_steps=100_000))
        second = engine.start(config(max_steps=10))
        assert engine.status(second).status == "queued"
        engine.stop(second)
        assert engine.status(second).status == "stopped"
        engine.stop(first)
        assert engine.wait(first, scaled(60)).status == "stopped"
        assert engine.status(second).step == 0
    finally:
        engine.close()


def test_pause_resume_and_stop_act_within_one_step(engine) -> None:
    run_id = engine.start(config(epochs=10_000, log_every=1))
    wait_for(lambda: engine.status(run_id).step >= 20)
    training = engine.status(run_id)
    assert training.steps_per_second > 0 and training.eta_seconds > 0  # live, not at the end

    engine.pause(run_id)
    at_request = engine.status(run_id).step
    # It saves a checkpoint before it shows paused: seconds on a loaded machine. Acting
    # within one step is what is asserted, below.
    wait_for(lambda: engine.status(run_id).status == "paused", timeout=60)
    paused_at = engine.status(run_id).step
    assert paused_at <= at_request + 1
    holds_for(lambda: engine.status(run_id).step == paused_at, 0.3, "nothing trains while paused")

    engine.resume(run_id)
    wait_for(lambda: engine.status(run_id).step >= paused_at + 20, timeout=30)
    assert engine.status(run_id).status == "running"

    started = time.monotonic()
    engine.stop(run_id)
    at_request = engine.status(run_id).step  # read after the request, as for the pause
    final = engine.wait(run_id, scaled(10))
    assert final.status == "stopped"
    assert final.step <= at_request + 1
    assert time.monotonic() - started < scaled(10.0)  # generous: a loaded machine is slow
    kinds = [e.kind for e in engine.events(run_id) if e.kind != PER_LAYER_EVENT]
    assert kinds == ["init", "paused", "resumed"]
    assert engine.metrics(run_id).last_step == final.step  # every finished step was logged


def test_huge_learning_rate_diverges_and_keeps_earlier_metrics(engine) -> None:
    # Heavy-ball momentum at η = 100 overflows within a few steps (plain SGD at that rate
    # only kills the ReLUs: the loss stays finite).
    run_id = engine.start(
        config(
            optimizer="momentum",
            epochs=50,
            hyperparameters={"learning_rate": 100.0, "momentum": 0.99},
        )
    )
    status = engine.wait(run_id, scaled(120))
    assert status.status == "diverged"
    diverged_at = status.final_metrics["diverged_at"]
    assert status.step == diverged_at  # logging every step: it stops at that step
    metrics = engine.metrics(run_id)
    assert metrics.steps.tolist() == list(range(1, diverged_at + 1))
    finite = np.isfinite(metrics["loss"]) & np.isfinite(metrics["param_norm"])
    assert finite[:-1].all() and not finite[-1]  # the loss or the weights overflowed
    assert ("diverged", diverged_at) in [(e.kind, e.step) for e in engine.events(run_id)]


def test_same_seed_same_weights_and_batches_across_threads(tmp_path) -> None:
    engine = Engine(tmp_path / "lab.sqlite", max_concurrent=3)
    try:
        same = [
            engine.start(config(max_steps=30, optimizer=name, hyperparameters={}))
            for name in ("sgd", "adam")
        ]
        other = engine.start(config(max_steps=30, seed=1))
        for run_id in [*same, other]:
            engine.wait(run_id, scaled(120))
        init = [engine.events(r)[0].payload for r in [*same, other]]
        keys = ("weights_sha256", "first_batch_sha256")
        assert [init[0][k] for k in keys] == [init[1][k] for k in keys]
        assert all(init[0][k] != init[2][k] for k in keys)
    finally:
        engine.close()


def test_identical_runs_in_parallel_train_identically(engine) -> None:
    ids = [engine.start(config(max_steps=40)) for _ in range(2)]
    series = [engine.wait(r, scaled(120)) and engine.metrics(r)["loss"] for r in ids]
    np.testing.assert_array_equal(series[0], series[1])


def test_live_knob_change_is_applied_and_recorded(engine) -> None:
    run_id = engine.start(
        config(epochs=10_000, hyperparameters={"learning_rate": 0.1, "radius": 100.0})
    )
    wait_for(lambda: engine.status(run_id).step >= 10)
    with pytest.raises(InvalidHyperparameters) as caught:
        engine.update(run_id, radius=-1.0, clip_norm=1.0, momentum=0.9)
    assert set(caught.value.errors) == {"radius", "clip_norm", "momentum"}
    engine.update(run_id, radius=2.0, learning_rate=0.05)
    wait_for(lambda: len([e for e in engine.events(run_id) if e.kind == "knob"]) == 2)
    changes = {e.payload["name"]: e for e in engine.events(run_id) if e.kind == "knob"}
    assert changes["radius"].payload == {"name": "radius", "value": 2.0, "previous": 100.0}
    step = changes["radius"].step
    assert changes["learning_rate"].step == step  # one change: its knobs at one step
    wait_for(lambda: (engine.metrics(run_id).last_step or 0) >= step + 5)
    engine.stop(run_id)
    metrics = engine.metrics(run_id)
    after = metrics.steps >= step
    assert np.all(metrics["radius"][after] == 2.0) and np.all(metrics["radius"][~after] == 100)
    assert np.all(metrics["param_norm"][after] <= 2.0 * 1.00001)
    assert metrics["projection_active"][metrics.steps == step][0] == 1.0
    assert np.all(metrics["learning_rate"][after] == np.float32(0.05))


class StepBetweenPuts(queue.SimpleQueue):
    """A run's queue of knob changes whose `put` returns once the training thread has
    taken the item: a step falls between any two puts, as a busy machine may make it."""

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        super().put(item, block, timeout)
        wait_for(self.empty, what="the run to take the change")


def test_the_knobs_of_one_change_take_effect_at_one_step(engine) -> None:
    run_id = engine.start(
        config(epochs=10_000, hyperparameters={"learning_rate": 0.1, "radius": 100.0})
    )
    wait_for(lambda: engine.status(run_id).step >= 10)
    engine._active(run_id).updates = StepBetweenPuts()
    engine.update(run_id, radius=2.0, learning_rate=0.05)
    wait_for(lambda: len([e for e in engine.events(run_id) if e.kind == "knob"]) == 2)
    engine.stop(run_id)
    changes = [e for e in engine.events(run_id) if e.kind == "knob"]
    assert {e.payload["name"] for e in changes} == {"radius", "learning_rate"}
    assert len({e.step for e in changes}) == 1, [(e.payload["name"], e.step) for e in changes]


def test_invalid_config_writes_nothing(engine) -> None:
    threads = set(threading.enumerate())
    with pytest.raises(InvalidHyperparameters) as caught:
        engine.start({**FAST, "batch_size": -1, "hyperparameters": {"learning_rate": "x"}})
    assert set(caught.value.errors) == {"batch_size", "learning_rate"}
    assert engine.list() == []
    assert new_threads(threads) == []


def test_a_failing_run_reports_the_error_and_others_go_on(engine, monkeypatch) -> None:
    from dataclasses import replace

    from core import data

    # A dataset smaller on disk than the catalog says: the config passes, the trainer refuses.
    load = data.load

    def load_shrunk_mnist(name: str, **kwargs) -> data.Dataset:
        loaded = load(name, **kwargs)
        if name != "mnist-5k":
            return loaded
        return replace(loaded, x_train=loaded.x_train[:10], y_train=loaded.y_train[:10])

    monkeypatch.setattr(data, "load", load_shrunk_mnist)
    bad = engine.start(config(dataset="mnist-5k"))
    good = engine.start(config(max_steps=10))
    failed = engine.wait(bad, scaled(60))
    assert failed.status == "failed"
    assert failed.error.startswith("ValueError: batch_size: larger than the training split")
    assert "trainer.py" in failed.error
    assert engine.wait(good, scaled(60)).status == "completed"


def test_closing_the_engine_interrupts_runs_and_a_new_engine_lists_them(tmp_path) -> None:
    engine = Engine(tmp_path / "lab.sqlite", max_concurrent=1)
    running = engine.start(config(epochs=10_000))
    queued = engine.start(config(max_steps=10))
    wait_for(lambda: engine.status(running).step >= 5)
    engine.close()
    reopened = Engine(tmp_path / "lab.sqlite")
    try:
        assert reopened.status(running).status == "interrupted"
        assert reopened.status(queued).status == "interrupted"
        assert reopened.metrics(running).last_step >= 5
    finally:
        reopened.close()


def test_multitask_model_logs_each_task(engine) -> None:
    run_id = engine.start(
        config(max_steps=22, multitask=True, task_weights={"digit": 1.0, "parity": 0.5})
    )
    assert engine.wait(run_id, scaled(60)).status == "completed"
    metrics = engine.metrics(run_id)
    for key in (
        "loss/digit",
        "loss/parity",
        "grad_norm/digit",
        "grad_norm/parity",
        "accuracy/parity",
        "val_accuracy/parity",
        "step_norm/parity",
    ):
        assert key in metrics, key
    np.testing.assert_allclose(
        metrics["loss"], metrics["loss/digit"] + 0.5 * metrics["loss/parity"], rtol=1e-5
    )


def test_a_task_weight_changes_while_a_multitask_run_trains(engine) -> None:
    run_id = engine.start(config(epochs=10_000, multitask=True, log_every=1))
    wait_for(lambda: engine.status(run_id).step >= 5)
    with pytest.raises(InvalidHyperparameters) as caught:
        engine.update(run_id, **{"task_weight/digit": 0.0, "task_weight/parity": 0.0})
    assert caught.value.errors == {"task_weights": "at least one weight must stay above 0"}
    engine.update(run_id, **{"task_weight/parity": 0.25})
    wait_for(lambda: any(e.kind == "knob" for e in engine.events(run_id)))
    (change,) = [e for e in engine.events(run_id) if e.kind == "knob"]
    assert change.payload == {"name": "task_weight/parity", "value": 0.25, "previous": 1.0}
    wait_for(lambda: (engine.metrics(run_id).last_step or 0) >= change.step + 3)
    assert engine.status(run_id).knobs["task_weight/parity"] == 0.25
    engine.stop(run_id)
    metrics = engine.metrics(run_id)
    for weight, steps in ((1.0, metrics.steps < change.step), (0.25, metrics.steps >= change.step)):
        expected = metrics["loss/digit"][steps] + weight * metrics["loss/parity"][steps]
        np.testing.assert_allclose(metrics["loss"][steps], expected, rtol=1e-5)


def test_a_single_task_run_has_no_task_weights_to_change(engine) -> None:
    run_id = engine.start(config(epochs=10_000))
    try:
        with pytest.raises(InvalidHyperparameters, match="task_weight/parity: is not a live knob"):
            engine.update(run_id, **{"task_weight/parity": 0.5})
    finally:
        engine.stop(run_id)


def test_mirrored_strategy_trains_like_one_device(engine) -> None:
    ids = [engine.start(config(max_steps=20, strategy=s)) for s in ("default", "mirrored")]
    one, two = (engine.wait(r, scaled(120)) for r in ids)
    assert one.status == two.status == "completed"
    assert engine.events(ids[1])[0].payload["replicas"] == 2
    np.testing.assert_allclose(
        engine.metrics(ids[1])["loss"], engine.metrics(ids[0])["loss"], rtol=1e-4
    )


def test_offline_tfds_dataset_fails_fast_with_how_to(engine, tmp_path, monkeypatch) -> None:
    from core.data import tfds_source

    monkeypatch.setattr(tfds_source, "network_reachable", lambda timeout=2.0: False)
    started = time.monotonic()
    run_id = engine.start(config(dataset="mnist", data_dir=str(tmp_path / "tfds")))
    status = engine.wait(run_id, scaled(30))
    assert status.status == "failed" and time.monotonic() - started < scaled(5)
    # The message says what to do, and nothing of where in the lab it was raised.
    assert status.error.startswith("dataset: 'mnist' is not prepared") and "tfds" in status.error
    assert ".py:" not in status.error


@pytest.mark.slow
def test_lenet_adamw_learns_mnist_5k(engine) -> None:
    run_id = engine.start(
        RunConfig(
            model="lenet",
            dataset="mnist-5k",
            optimizer="adamw",
            hyperparameters={"learning_rate": 1e-3},
            batch_size=64,
            epochs=10,
            log_every=10,
        )
    )
    status = engine.wait(run_id, scaled(600))
    assert status.status == "completed"
    print(f"\nlenet + adamw, 10 epochs: {status.final_metrics}")
    assert status.final_metrics["val_accuracy"] >= 0.92


def test_multiworker_strategy_runs_as_a_single_worker_without_tf_config(engine, monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    run_id = engine.start(config(max_steps=10, strategy="multiworker"))
    status = engine.wait(run_id, scaled(120))
    assert status.status == "completed", status.error
    assert engine.events(run_id)[0].payload["replicas"] == 1


def test_a_scheduled_run_logs_eta_t_and_a_live_change_scales_the_schedule(engine) -> None:
    from tests.unit.test_lr_schedules import reference

    total, warmup = 300, 30
    run_id = engine.start(
        config(
            epochs=100,
            max_steps=total,  # the schedule's T: reached before the epochs end
            lr_schedule="cosine",
            warmup_steps=warmup,
            hyperparameters={"learning_rate": 0.01},
        )
    )
    wait_for(lambda: engine.status(run_id).step >= 60, 120, "60 steps")
    engine.update(run_id, learning_rate=0.02)
    assert engine.wait(run_id, scaled(120)).status == "completed"
    (change,) = [e for e in engine.events(run_id) if e.kind == "knob"]
    metrics = engine.store.read_metrics(run_id)
    peaks = np.where(metrics.steps < change.step, 0.01, 0.02)
    factors = [reference("cosine", warmup, total, int(step)) for step in metrics.steps]
    np.testing.assert_allclose(metrics["learning_rate"], peaks * factors, rtol=1e-5, atol=1e-8)
    assert engine.status(run_id).knobs["learning_rate"] == 0.02  # the peak, as set
