"""`LabCallback`: a script's own model and data, trained with `model.fit`, as a lab run
that the store records and any process steers."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import keras
import numpy as np
import pytest

from core.engine import LabCallback
from core.engine.client import EngineClient
from core.optimizers import build
from core.store import Store
from tests.apptest import live_specs, page
from tests.cli import run_main
from tests.waiting import scaled, wait_for
from ui import nav

ROOT = Path(__file__).resolve().parents[2]

# A user's script: its own functional model and NumPy data, nothing of the lab's but the
# callback (and, here, one of its optimizers).
SCRIPT = """
import sys
import keras
import numpy as np
from core.engine import LabCallback
from core.optimizers import build

rng = np.random.default_rng(0)
x = rng.normal(size=(512, 6)).astype("float32")
y = (x[:, 0] + x[:, 1] > 0).astype("int32")
inputs = keras.Input((6,))
outputs = keras.layers.Dense(2)(keras.layers.Dense(16, activation="relu")(inputs))
model = keras.Model(inputs, outputs, name="mine")
model.compile(
    optimizer=build("adamw", learning_rate=0.001),
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
)
callback = LabCallback(name="a script's fit", store=sys.argv[1])
model.fit(x, y, batch_size=32, epochs=10_000, verbose=0, callbacks=[callback])
print(callback.run_id)
"""


def data(n: int = 256) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(n, 6)).astype("float32")
    return x, (x[:, 0] - x[:, 2] > 0).astype("int32")


def functional_model(optimizer: keras.optimizers.Optimizer) -> keras.Model:
    inputs = keras.Input((6,))
    hidden = keras.layers.Dense(16, activation="relu", name="hidden")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(2, name="logits")(hidden), name="mine")
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def test_a_fit_with_a_lab_optimizer_records_metrics_and_telemetry(tmp_path: Path) -> None:
    store_path = tmp_path / "lab.sqlite"
    model = functional_model(build("adamw", learning_rate=0.01, telemetry=True))
    callback = LabCallback(store=store_path, log_every=2)
    fit = {"batch_size": 32, "epochs": 2, "validation_data": data(64), "verbose": 0}
    model.fit(*data(), callbacks=[callback], **fit)

    with Store(store_path) as store:
        record = store.get_run(callback.run_id)
        metrics = store.read_metrics(callback.run_id)
    assert record.status == "completed" and record.name == "adamw · mine (script)"
    assert record.config["optimizer"] == "adamw" and record.config["max_steps"] == 16
    assert record.config["hyperparameters"]["weight_decay"] == pytest.approx(0.004)
    logged = metrics.steps[~np.isnan(metrics["loss"])]
    assert logged.tolist() == list(range(2, 17, 2))
    assert metrics.steps[~np.isnan(metrics["val_accuracy"])].tolist() == [8, 16]
    # The lab's telemetry of each logged step, per layer too.
    for key in ("grad_norm", "param_norm", "learning_rate", "step_norm/hidden", "sparsity/logits"):
        assert math.isfinite(metrics[key][-1]), key
    assert record.final_metrics["steps"] == 16
    assert record.final_metrics["val_accuracy"] == pytest.approx(metrics["val_accuracy"][-1])


class MostConfident(keras.metrics.Metric):
    """A metric that is no mean: the largest logit seen since the epoch began."""

    def __init__(self) -> None:
        super().__init__(name="most_confident")
        self.top = self.add_variable(shape=(), initializer="zeros", name="top")

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        self.top.assign(keras.ops.maximum(self.top, keras.ops.max(y_pred)))

    def result(self) -> Any:
        return self.top


def test_a_fit_logs_each_batchs_own_loss_and_metrics(tmp_path: Path) -> None:
    x, y = data(200)  # an epoch of 6 batches of 32 and one of 8
    model = functional_model(keras.optimizers.SGD(learning_rate=0.5))
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer=model.optimizer, loss=loss, metrics=["accuracy", MostConfident()])
    one_by_one: list[tuple[float, float]] = []

    class EvaluateEachBatch(keras.callbacks.Callback):
        """Each batch's loss and accuracy at the weights the step starts from."""

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            xb, yb = x[batch * 32 : (batch + 1) * 32], y[batch * 32 : (batch + 1) * 32]
            logits = np.asarray(self.model(xb))
            one_by_one.append((float(loss(yb, logits)), float(np.mean(logits.argmax(1) == yb))))

    callback = LabCallback(store=tmp_path / "lab.sqlite")
    fit = {"batch_size": 32, "epochs": 2, "shuffle": False, "verbose": 0}
    model.fit(x, y, callbacks=[EvaluateEachBatch(), callback], **fit)

    with Store(tmp_path / "lab.sqlite") as store:
        metrics = store.read_metrics(callback.run_id)
    assert metrics.steps.tolist() == list(range(1, 15))
    expected_loss, expected_accuracy = np.array(one_by_one).T
    np.testing.assert_allclose(metrics["loss"], expected_loss, rtol=1e-5)
    np.testing.assert_allclose(metrics["accuracy"], expected_accuracy, atol=1e-6)
    # Not Keras's means since the epoch began, which smooth the loss out.
    assert not np.allclose(metrics["loss"][1:7], np.cumsum(expected_loss[:7])[1:] / np.arange(2, 8))
    # A metric that is no mean keeps Keras's value, under a name that says what it is.
    assert "most_confident" not in metrics.keys
    assert np.isfinite(metrics["most_confident_since_epoch_start"]).all()


def test_a_fit_with_a_keras_optimizer_is_recorded_and_shown(tmp_path: Path, lab) -> None:
    """Any Keras optimizer works; the Live and Compare pages draw its run."""
    model = functional_model(keras.optimizers.SGD(learning_rate=0.05))
    callback = LabCallback(name="keras sgd", store=lab.store.path)
    model.fit(*data(), batch_size=64, epochs=1, verbose=0, callbacks=[callback])
    run = lab.status(callback.run_id)
    assert run.status == "completed" and run.config["optimizer"] == "keras:SGD"
    assert run.config["hyperparameters"] == {"learning_rate": pytest.approx(0.05)}
    assert lab.metrics(callback.run_id).steps.tolist() == [1, 2, 3, 4]
    # Each fit a run of its own, from step 1, with what its own optimizer records.
    first = callback.run_id
    lab_model = functional_model(build("sgd", learning_rate=0.05, telemetry=True))
    lab_model.fit(*data(), batch_size=64, epochs=1, verbose=0, callbacks=[callback])
    assert "grad_norm" in lab.metrics(callback.run_id)
    model.fit(*data(), batch_size=64, epochs=1, verbose=0, callbacks=[callback])
    assert callback.run_id != first and lab.status(callback.run_id).status == "completed"
    metrics = lab.metrics(callback.run_id)
    assert metrics.steps.tolist() == [1, 2, 3, 4] and "grad_norm" not in metrics
    for shown, key in ((nav.LIVE, "watch"), (nav.COMPARE, "compare")):
        at = page(shown)
        at.session_state[key] = [callback.run_id]
        at.run()
        assert not at.exception, (shown.title, [e.value for e in at.exception])
        assert at.get("plotly_chart") or live_specs(at), shown.title  # Live's: live charts


def test_bad_arguments_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="log_every"):
        LabCallback(log_every=0)
    with pytest.raises(ValueError, match="name"):
        LabCallback(name=" ")


def test_another_process_changes_the_rate_and_stops_a_scripts_fit(tmp_path: Path) -> None:
    """The issue's test: a script of its own trains with `fit` and the callback; the CLI,
    in another process, changes its learning rate, pauses, resumes and stops it."""
    store_path = tmp_path / "lab.sqlite"
    script = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(store_path)],
        cwd=ROOT,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "stderr.txt").open("w"),
        text=True,
    )
    try:
        wait_for(store_path.exists, 120, "no store")
        with Store(store_path) as store:
            wait_for(store.list_runs, 60, "no run")
            (run,) = store.list_runs()
            wait_for(lambda: (store.read_metrics(run.id).last_step or 0) >= 20, 60, "no steps")
            code, out, err = run_main("set", "--store", store_path, run.id, "--lr", "0.05")
            assert code == 0, err
            assert run_main("pause", "--store", store_path, run.id)[0] == 0
            wait_for(lambda: store.get_run(run.id).status == "paused", 30, "not paused")
            assert run_main("resume", "--store", store_path, run.id)[0] == 0
            wait_for(lambda: store.get_run(run.id).status == "running", 30, "not resumed")
            assert run_main("stop", "--store", store_path, run.id)[0] == 0
        out, _ = script.communicate(timeout=scaled(60))
    finally:
        script.kill()
    assert script.returncode == 0, (tmp_path / "stderr.txt").read_text()[-3000:]
    assert out.strip() == run.id
    client = EngineClient(Store(store_path))
    ended = client.status(run.id)
    assert ended.status == "stopped" and ended.knobs["learning_rate"] == 0.05
    assert ended.config["optimizer"] == "adamw"
    events = {event.kind: event for event in client.events(run.id)}
    assert events["knob"].payload["value"] == 0.05 and {"paused", "resumed"} <= set(events)
    assert ended.step < 10_000 * 16  # stopped, long before its 10,000 epochs
    client.close()


def test_live_steers_a_scripts_run_with_a_keras_optimizer_but_offers_no_knobs(lab) -> None:
    callback = LabCallback(store=lab.store.path)
    callback.set_model(functional_model(keras.optimizers.Adam()))
    callback.set_params({"epochs": 3, "steps": 10, "verbose": 0})
    callback.on_train_begin()  # as `fit` begins: the run trains, in this process
    try:
        at = page(nav.LIVE)
        at.session_state["watch"] = [callback.run_id]
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert any("no live knob" in caption.value for caption in at.caption)
        at.button(key=f"stop:{callback.run_id}").click().run()  # through the store

        def batch_says_stop() -> bool:  # as `fit` asks after each batch
            callback.on_train_batch_end(callback.step, {"loss": 1.0})
            return callback.model.stop_training

        wait_for(batch_says_stop, 10, "the stop never reached the callback")
    finally:
        callback.on_train_end()
    assert lab.status(callback.run_id).status == "stopped"
