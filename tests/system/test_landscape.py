"""The loss landscape around a checkpoint: its centre is the loss the run logged, it is
computed once and kept, on every model at every checkpoint, and Live draws it after the
engine computed it."""

from __future__ import annotations

import numpy as np
import pytest

from bench import models as bench_models
from core import models
from core.engine import Engine, RunConfig
from core.engine.landscape import (
    GRID,
    POINTS,
    _filter_normalized,
    compute,
    kept_landscape,
    landscape_path,
)
from core.knobs import InvalidInput
from tests.apptest import finished_run, page
from tests.waiting import scaled, wait_for
from ui import nav


def test_the_centre_is_the_loss_the_run_logged_on_that_batch(lab) -> None:
    run_id = finished_run(lab, max_steps=40, checkpoint_every=10, log_every=1)
    landscape = kept_landscape(lab.store, run_id, 20)
    metrics = lab.metrics(run_id)
    logged = metrics["loss"][np.flatnonzero(metrics.steps == 21)[0]]  # the next batch's
    assert landscape.centre == pytest.approx(logged, rel=1e-6)
    middle = POINTS // 2
    assert landscape.along_random[middle] == pytest.approx(logged, rel=1e-6)
    assert landscape.surface[GRID // 2, GRID // 2] == pytest.approx(logged, rel=1e-6)
    assert landscape.surface.shape == (GRID, GRID) and np.isfinite(landscape.surface).all()
    # Far from the checkpoint the loss rises on both sides of the slices.
    assert landscape.along_update[0] > logged and landscape.along_update[-1] > logged
    # Every checkpoint is on the plane; the centre at its origin.
    assert landscape.trajectory_steps.tolist() == [c.step for c in lab.checkpoints(run_id)]
    centre = landscape.trajectory[landscape.trajectory_steps.tolist().index(20)]
    assert np.allclose(centre, 0.0, atol=1e-6)
    # Kept: read back, not computed again.
    path = landscape_path(lab.store, run_id, 20)
    written = path.stat().st_mtime_ns
    again = kept_landscape(lab.store, run_id, 20)
    assert path.stat().st_mtime_ns == written
    assert np.array_equal(again.surface, landscape.surface)
    with pytest.raises(InvalidInput, match=r"checkpoint: run .* has no checkpoint of step 15"):
        kept_landscape(lab.store, run_id, 15)
    lab.delete(run_id)
    assert not path.exists()  # gone with the run


def test_directions_are_filter_normalized() -> None:
    rng = np.random.default_rng(0)
    kernel, bias = rng.normal(size=(5, 3)), rng.normal(size=3)
    direction = _filter_normalized([rng.normal(size=(5, 3)), rng.normal(size=3)], [kernel, bias])
    assert np.allclose(np.linalg.norm(direction[0], axis=0), np.linalg.norm(kernel, axis=0))
    assert not direction[1].any()  # biases are left out


def test_every_model_has_a_landscape_at_its_first_middle_and_last_checkpoint(tmp_path) -> None:
    # Two epochs of 5 steps: checkpoints at 4, 8 and 10, the last at the end of the data
    # (no batch after it), on dense, convolutional and attention models alike.
    # The bench's models, which `test_bench` may have registered in this process, are not
    # the lab's: 38 or 48 layers at this rate do not learn in 10 steps.
    names = [
        info.name for info in models.catalog(plugins=True) if info.name not in bench_models.NAMES
    ]
    assert {"mlp", "lenet", "cnn", "tiny_vit"} <= set(names)
    engine = Engine(tmp_path / "lab.sqlite", max_concurrent=2)
    try:
        runs = {
            name: engine.start(
                RunConfig.from_dict(
                    {
                        "dataset": "digits",
                        "model": name,
                        "optimizer": "adamw",
                        "epochs": 2,
                        "batch_size": 256,
                        "checkpoint_every": 4,
                        "log_every": 1,
                        "hyperparameters": {"learning_rate": 0.01},
                    }
                )
            )
            for name in names
        }
        for name, run_id in runs.items():
            engine.wait(run_id, scaled(300))
            assert [c.step for c in engine.checkpoints(run_id)] == [4, 8, 10], name
            metrics = engine.metrics(run_id)
            for step in (4, 8, 10):
                landscape = compute(engine.store, run_id, step)
                middle = POINTS // 2
                assert np.isfinite(landscape.surface).all(), (name, step)
                assert landscape.along_random[middle] == pytest.approx(landscape.centre, rel=1e-6)
                if step < 10:  # the loss logged at the next step, on that step's batch
                    logged = metrics["loss"][np.flatnonzero(metrics.steps == step + 1)[0]]
                    assert landscape.centre == pytest.approx(logged, rel=1e-5), (name, step)
                else:  # the last batch, at the weights after it: below where the run began
                    assert landscape.centre < metrics["loss"][0], name
    finally:
        engine.close()


def test_a_conv_kernel_is_normalized_per_output_unit() -> None:
    rng = np.random.default_rng(1)
    kernel = rng.normal(size=(5, 5, 3, 6))
    (direction,) = _filter_normalized([rng.normal(size=kernel.shape)], [kernel])
    assert np.allclose(
        np.sqrt((direction**2).sum(axis=(0, 1, 2))), np.sqrt((kernel**2).sum(axis=(0, 1, 2)))
    )


def test_live_asks_the_engine_for_a_landscape_and_draws_it(lab) -> None:
    run_id = finished_run(lab, max_steps=30, checkpoint_every=10)
    at = page(nav.LIVE)
    at.session_state["watch"] = [run_id]
    at.run()
    assert not at.exception
    assert at.selectbox(key=f"landscape:step:{run_id}").options == ["step 30", "step 20", "step 10"]
    at.button(key=f"landscape:ask:{run_id}").click().run()
    assert not at.exception
    wait_for(lambda: lab.landscape(run_id, 30) is not None, 120, "no landscape computed")
    wait_for(
        lambda: any("Loss around step 30" in c.proto.spec for c in at.run().get("plotly_chart")),
        30,
        "the landscape drawn",
    )
    assert not at.exception
