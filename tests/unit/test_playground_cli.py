"""`optlab playground` (issue 54): the last point and loss, or the whole path as JSON; bad
input exits 2 naming each field, and prints nothing else."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from core import playground
from tests.cli import run_main
from tests.imports import ROOT


def test_json_holds_the_path_from_the_start_one_point_a_step() -> None:
    code, out, err = run_main(
        "playground", "beale", "--optimizer", "adam", "--set", "learning_rate=0.1",
        "--set", "beta_1=0.8", "--start", "1,1.5", "--steps", "40", "--json",
    )  # fmt: skip
    assert code == 0 and not err
    shown = json.loads(out)
    assert {"surface", "optimizer", "points", "losses", "diverged"} <= shown.keys()
    assert (shown["surface"], shown["optimizer"], shown["diverged"]) == ("beale", "adam", False)
    assert shown["knobs"]["beta_1"] == 0.8 and shown["knobs"]["clip_norm"] is None
    assert len(shown["points"]) == len(shown["losses"]) == 41
    assert shown["points"][0] == [1.0, 1.5] and len(shown["clipped"]) == 40
    path = playground.trajectory(
        "beale", "adam", {"learning_rate": 0.1, "beta_1": 0.8}, (1.0, 1.5), 40
    )
    # The shortest decimals that read back as the float32 values: exactly those.
    assert np.array_equal(np.float32(shown["points"]), np.float32(path.points))
    assert np.array_equal(np.float32(shown["losses"]), np.float32(path.losses))
    assert len(out) < len(json.dumps(path.points.tolist()) + json.dumps(path.losses.tolist()))


def test_it_prints_the_last_point_and_loss_and_says_how_it_diverged() -> None:
    code, out, err = run_main(
        "playground", "ill_conditioned", "--optimizer", "sgd", "--set", "learning_rate=0.021"
    )
    assert code == 0 and not err
    lines = out.splitlines()
    assert lines[0].startswith("ill_conditioned, sgd: ") and "from (-1.8, 0.6)" in lines[0]
    assert lines[1].startswith("last point (") and ", loss " in lines[1]
    assert lines[2].startswith("diverged at step ") and "left the bounds" in lines[2]
    code, out, _ = run_main("playground", "himmelblau", "--optimizer", "momentum", "--steps", "7")
    assert code == 0 and "himmelblau, momentum: 7 steps from (0, 0)" in out
    assert "diverged" not in out


@pytest.mark.parametrize(
    ("flags", "fields"),
    [
        (["moon", "--optimizer", "adam"], ["surface: unknown surface 'moon'"]),
        (["saddle", "--optimizer", "adamm"], ["optimizer: unknown optimizer 'adamm'"]),
        (["saddle", "--optimizer", "sgd", "--set", "radius"], ["set: must read KNOB=VALUE"]),
        (
            ["saddle", "--optimizer", "sgd", "--set", "learning_rate=fast", "--set", "clip=1"],
            ["learning_rate: must be a number", "clip: unknown hyperparameter"],
        ),
        (["saddle", "--optimizer", "sgd", "--start", "1"], ["start: must read X,Y"]),
        (["saddle", "--optimizer", "sgd", "--start", "9,0"], ["start: must lie within"]),
        (["saddle", "--optimizer", "sgd", "--steps", "2.5"], ["steps: must be a whole number"]),
        (["saddle", "--optimizer", "sgd", "--steps", "many"], ["steps: must be a number"]),
        (
            ["moon", "--optimizer", "sgd", "--set", "radius=0", "--steps", "x"],
            ["surface: unknown", "radius: must be in", "steps: must be a number"],
        ),
    ],
)
def test_bad_input_exits_2_naming_each_field(flags: list[str], fields: list[str]) -> None:
    code, out, err = run_main("playground", *flags)
    assert code == 2 and not out and len(err.splitlines()) == 1, err
    for field in fields:
        assert field in err


def test_bad_input_prints_only_its_error_line_from_a_shell() -> None:
    # In a process of its own, so that the native lines TensorFlow writes would show.
    result = subprocess.run(
        [sys.executable, "-m", "core", "playground", "rosenbrock", "--optimizer", "sgd",
         "--set", "radius=-1", "--start", "0,99"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "error: radius: must be in (0, 1e+06] (got -1.0); start: must lie within "
        "rosenbrock's bounds, x ∈ [-6, 6], y ∈ [-5, 7]"
    ]
