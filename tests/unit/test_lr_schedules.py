"""Learning-rate schedules as a run field: `LiveSchedule` against a float64 reference,
and its peak as the live learning rate."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from core import optimizers
from core.engine import RunConfig
from core.knobs import InvalidInput
from core.optimizers.schedules import LiveSchedule


def reference(shape: str, warmup: int, total: int, step: int) -> float:
    """w(t)·d(t) at step t (1-based), in float64, as the module's docstring states it."""
    w = min(1.0, step / warmup) if warmup else 1.0
    if shape == "cosine":
        p = min(max((step - warmup) / max(total - warmup, 1), 0.0), 1.0)
        return w * 0.5 * (1 + math.cos(math.pi * p))
    if shape == "step":
        return w * 0.1 ** ((step > total / 2) + (step > 3 * total / 4))
    return w


@pytest.mark.parametrize("shape", ["constant", "cosine", "step"])
@pytest.mark.parametrize("warmup", [0, 7])
def test_the_schedule_matches_its_float64_reference(shape: str, warmup: int) -> None:
    schedule = LiveSchedule(0.3, shape, warmup, 40)
    got = [float(schedule(i)) for i in range(45)]  # after i steps taken: step i + 1
    expected = [0.3 * reference(shape, warmup, 40, i + 1) for i in range(45)]
    # float32: 1 + cos(πp) cancels near the end, so the error is absolute, ~ε·peak.
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    if warmup:
        assert got[0] == pytest.approx(0.3 / warmup) and max(got) == pytest.approx(0.3)


def test_a_live_change_scales_the_schedule_and_the_step_takes_eta_t() -> None:
    schedule = LiveSchedule(0.1, "step", 0, 8)
    optimizer = optimizers.build("sgd", learning_rate=schedule, telemetry=True)
    x = keras.Variable(np.zeros(1, np.float32))
    g = tf.constant([1.0])
    positions = [0.0]
    for step in range(1, 9):
        if step == 6:
            assert optimizer.set_knob("learning_rate", 0.2) == 0.2
        optimizer.apply([g], [x])
        positions.append(float(x.numpy()[0]))
        peak = 0.1 if step < 6 else 0.2
        rate = peak * reference("step", 0, 8, step)
        assert float(optimizer.applied_learning_rate()) == pytest.approx(rate)
        assert positions[-2] - positions[-1] == pytest.approx(rate, rel=1e-4)  # x ← x − η_t·g
    assert optimizer.get_knob("learning_rate") == pytest.approx(0.2)  # the peak
    assert set(optimizer.live_variables) >= {"learning_rate"}
    restored = type(optimizer).from_config(optimizer.get_config())
    assert restored.get_knob("learning_rate") == pytest.approx(0.2)
    assert restored.get_config()["learning_rate"]["config"]["shape"] == "step"


def test_bad_schedules_are_refused_naming_the_field() -> None:
    with pytest.raises(InvalidInput) as refused:
        RunConfig.from_dict({"lr_schedule": "linear", "warmup_steps": -1})
    assert "cosine" in refused.value.errors["lr_schedule"]
    assert "warmup_steps" in refused.value.errors
    config = RunConfig.from_dict({"lr_schedule": "cosine", "warmup_steps": 50})
    assert (config.lr_schedule, config.warmup_steps) == ("cosine", 50)
    assert RunConfig.from_dict({}).lr_schedule == "constant"
