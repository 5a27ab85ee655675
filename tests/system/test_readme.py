"""The README's Python snippets are true: each runs as shown, in a fresh interpreter; and
every `optlab` command it shows is one the command line takes."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SNIPPETS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
# The README has these; a new one needs a test here.
KERAS_USE, CALLBACK, PLUGIN, MODEL_AND_DATA_PLUGIN = SNIPPETS

# What the first snippet leaves to the reader: a model. Afterwards it must train.
A_MODEL = """
import keras
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
"""
TRAINS = """
import numpy as np
x = np.random.default_rng(0).normal(size=(32, 4)).astype("float32")
y = np.arange(32) % 3
before = model.evaluate(x, y, verbose=0)
model.fit(x, y, epochs=20, verbose=0)
assert model.evaluate(x, y, verbose=0) < before
print("ok", type(optimizer).__name__)
"""

# After the plugin file is in the plugins folder, the lab knows the optimizer and its rule.
PLUGIN_STEPS = """
import numpy as np
import tensorflow as tf
from core import optimizers
spec = next(spec for spec in optimizers.specs() if spec.name == "scaled_sign_gd")
optimizer = spec.build(learning_rate=0.1)
x = tf.Variable([1.0, -2.0, 3.0])
g = np.array([0.5, -1.5, 0.0], "float32")
optimizer.apply_gradients([(tf.constant(g), x)])
expected = np.array([1.0, -2.0, 3.0]) - 0.1 * np.abs(g).mean() * np.sign(g)
np.testing.assert_allclose(x.numpy(), expected, rtol=1e-6)
print("ok", spec.source, optimizers.plugin_errors())
"""


def optlab_commands() -> list[list[str]]:
    """The arguments of every `optlab` command in the README's shell blocks."""
    shell = "\n".join(re.findall(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL))
    commands = []
    for line in shell.replace("\\\n", " ").splitlines():
        for part in line.split("#")[0].split(";"):
            words = shlex.split(part)
            if words and words[0] == ".venv/bin/optlab":
                commands.append(words[1:])
    return commands


@pytest.mark.parametrize("argv", optlab_commands(), ids=" ".join)
def test_every_optlab_command_shown_parses(argv: list[str]) -> None:
    from core.cli import build_parser
    from core.optimizers import catalog

    args = build_parser(list(catalog.BUILTIN), plugins=False).parse_args(argv)
    assert args.command == argv[0]


def test_the_readme_shows_the_commands() -> None:
    shown = {argv[0] for argv in optlab_commands()}
    assert {"train", "runs", "sweep", "resume", "fork", "export", "stop", "set", "lr-find"} <= shown


def run(code: str, **env: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
def test_the_keras_snippet_compiles_a_model_that_trains() -> None:
    assert run(A_MODEL + KERAS_USE + TRAINS).splitlines()[-1].startswith("ok")


@pytest.mark.slow
def test_the_plugin_snippet_is_a_plugin_the_lab_loads(tmp_path: Path) -> None:
    folder = tmp_path / "plugins"
    folder.mkdir(mode=0o755)
    (folder / "scaled_sign_gd.py").write_text(PLUGIN)
    last = run(PLUGIN_STEPS, OPTLAB_PLUGINS=str(folder)).splitlines()[-1]
    assert last.startswith("ok") and last.endswith("{}"), last


@pytest.mark.slow
def test_the_callback_snippet_records_its_fit_as_a_run(tmp_path: Path) -> None:
    from core.store import Store

    store_path = tmp_path / "lab.sqlite"
    run(CALLBACK, OPTLAB_STORE=str(store_path))
    with Store(store_path) as store:
        (record,) = store.list_runs()
        metrics = store.read_metrics(record.id)
    assert record.name == "my script" and record.status == "completed"
    assert record.config["optimizer"] == "adamw" and record.final_metrics["steps"] == 36
    assert {"loss", "accuracy", "val_accuracy", "grad_norm", "step_norm/sequential/dense"} <= set(
        metrics.keys
    )


@pytest.mark.slow
def test_the_model_and_dataset_snippet_is_a_plugin_the_lab_trains(tmp_path: Path) -> None:
    folder = tmp_path / "plugins"
    folder.mkdir(mode=0o755)
    (folder / "mine.py").write_text(MODEL_AND_DATA_PLUGIN)
    env = {"OPTLAB_PLUGINS": str(folder), "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, "-m", "core", "train", "--store", str(tmp_path / "lab.sqlite"),
         "--model", "wide_mlp", "--dataset", "xor", "--epochs", "15", "--lr", "0.01"],
        cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    final = dict(line.split() for line in done.stdout.splitlines()[1:] if len(line.split()) == 2)
    assert float(final["val_accuracy"]) > 0.9  # XOR needs the hidden layer: it learnt it
