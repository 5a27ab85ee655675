"""The demo race: three optimizers on one model, seed and initial weights, each set so that
a headline chart shows something, at a length a teacher picks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from core.demo_race import DEFAULT_LENGTH, LENGTHS, RUNNERS, length, race_configs
from core.engine import Engine
from tests.waiting import scaled


def test_each_length_trains_longer_and_every_runner_starts_alike() -> None:
    assert [known.epochs for known in LENGTHS] == sorted(known.epochs for known in LENGTHS)
    assert length(DEFAULT_LENGTH).minutes == 1.0
    configs = race_configs(DEFAULT_LENGTH)
    assert [c.optimizer for c in configs] == list(RUNNERS)
    assert {(c.model, c.dataset, c.seed, c.epochs) for c in configs} == {
        ("lenet", "mnist-5k", 0, length(DEFAULT_LENGTH).epochs)
    }
    assert len(race_configs("short", repeats=3)) == 9
    with pytest.raises(ValueError, match="length: one of 'short'"):
        race_configs("an hour")


def test_the_short_race_shows_something_on_every_headline_chart(tmp_path: Path) -> None:
    engine = Engine(tmp_path / "lab.sqlite", max_concurrent=3)
    try:
        ids = [engine.start(config) for config in race_configs("short")]
        runs = {}
        for run_id in ids:
            assert engine.wait(run_id, scaled(300)).status == "completed"
            runs[engine.status(run_id).config["optimizer"]] = engine.metrics(run_id)
    finally:
        engine.close()
    sgd, adamw, projected = runs["sgd"], runs["adamw"], runs["projected_gd"]
    # Gradient norm before and after clipping part, and the rate follows its schedule.
    clipped = sgd["clip_active"] > 0
    assert clipped.any() and (sgd["grad_norm_clipped"][clipped] < sgd["grad_norm"][clipped]).all()
    assert np.ptp(sgd["learning_rate"]) > 0.04
    # Weights frozen below the threshold: the sparsity charts climb.
    sparsity = np.column_stack([adamw[k] for k in adamw.keys if k.startswith("sparsity/")])
    assert np.nanmax(sparsity) > 0.05
    assert np.nanmean(sparsity[-1]) > np.nanmean(sparsity[0])
    # The weights held on the ball, most steps projected back onto it.
    assert np.mean(projected["projection_active"] > 0) > 0.9
    assert (projected["param_norm"] <= 12.0 * (1 + 1e-5)).all()
