"""The documentation's Python snippets (README.md and docs/*.md, read through `tests.docs`)
are true: each runs as shown, in a fresh interpreter; every `optlab` command it shows is one
the command line takes; and its commands that start a Ray cluster and have the lab join it
work as written, whether a token file exists or not."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests import docs
from tests.app_server import free_port
from tests.lean import NO_INSTRUMENTS_FLAGS
from tests.waiting import scaled

ROOT = Path(__file__).resolve().parents[2]
DOCS = docs.text()
SNIPPETS = re.findall(r"```python\n(.*?)```", DOCS, re.DOTALL)
SHELL_BLOCKS = re.findall(r"```sh\n(.*?)```", DOCS, re.DOTALL)
# The docs have these (docs/keras.md, docs/plugins.md, then docs/privacy.md); a new one
# needs a test here.
KERAS_USE, CALLBACK, PLUGIN, MODEL_AND_DATA_PLUGIN, ACCOUNTING_COSTS = SNIPPETS

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
    """The arguments of every `optlab` command in the documentation's shell blocks."""
    shell = "\n".join(SHELL_BLOCKS)
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
    from core.optimizers import optimizer_catalog

    args = build_parser(list(optimizer_catalog.BUILTIN), plugins=False).parse_args(argv)
    assert args.command == argv[0]


def test_the_docs_show_the_commands() -> None:
    shown = {argv[0] for argv in optlab_commands()}
    expected = {
        "train",
        "runs",
        "sweep",
        "resume",
        "fork",
        "export",
        "stop",
        "set",
        "lr-find",
        "present",
    }
    assert expected <= shown


def run(code: str, **env: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **env},
        capture_output=True,
        text=True,
        timeout=scaled(300),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_the_accounting_costs_snippet_times_each_accountant_without_tensorflow() -> None:
    """docs/privacy.md's measurement: a time for each accountant and step count, and one
    for each Odometer; none imports TensorFlow (the dashboard reads ε)."""
    code = ACCOUNTING_COSTS + "\nimport sys; assert 'tensorflow' not in sys.modules\n"
    lines = [line.split() for line in run(code).splitlines()]
    assert [line[:2] for line in lines] == [
        [accountant, count]
        for accountant in ("rdp", "pld")
        for count in ("100", "1000", "10000", "Odometer")
    ]
    assert all(0 < float(line[2]) < 60 for line in lines)


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
        cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=scaled(300),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    final = dict(line.split() for line in done.stdout.splitlines()[1:] if len(line.split()) == 2)
    assert float(final["val_accuracy"]) > 0.9  # XOR needs the hidden layer: it learnt it


def cluster_commands() -> list[str]:
    """The lines of the block that starts a Ray cluster (docs/scaling.md), continuations
    joined."""
    (block,) = [block for block in SHELL_BLOCKS if "ray start --head" in block]
    return [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def end_sessions(sessions: set[int]) -> None:
    """Kills every process of `sessions`: the commands started there, and the daemons
    that `ray start` leaves behind (they keep its session)."""
    for folder in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):  # gone meanwhile
            if os.getsid(int(folder.name)) in sessions:
                os.kill(int(folder.name), signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize("token_file", [False, True], ids=["no token file", "a token file"])
def test_the_cluster_commands_start_a_cluster_the_lab_trains_on(token_file, tmp_path) -> None:
    """The documented commands as written, on this machine (its address for HEAD, a free
    port for 6379; the lab trains a run from the command line for `make run`, on a store
    of its own), in a home folder of their own: without a token file, and with one (as a
    local `ray.init()` leaves: then `ray start --head` alone asks for the token and
    `ray start --address` alone gives none)."""
    home = tmp_path / "home"
    if token_file:
        (home / ".ray").mkdir(parents=True)
        (home / ".ray" / "auth_token").write_text("f" * 64)
    store = tmp_path / "lab.sqlite"
    port = free_port()
    lab = f"{sys.executable} -m core train --max-steps 2 --model mlp --dataset digits"
    lab += " " + " ".join([*NO_INSTRUMENTS_FLAGS, "--num-cpus", "1"])
    env = {name: value for name, value in os.environ.items() if not name.startswith("RAY_")}
    # Ray's session folders (and socket paths, at most 107 characters) in a short one.
    ray_folder = tempfile.mkdtemp(prefix="ray-")
    env |= {"HOME": str(home), "RAY_TMPDIR": ray_folder, "TF_CPP_MIN_LOG_LEVEL": "3"}
    sessions: set[int] = set()
    try:
        for line in cluster_commands():
            command = line.split("#")[0].replace("HEAD:6379", f"127.0.0.1:{port}")
            command = command.replace("--port 6379", f"--port {port}").replace("make run", lab)
            command = re.sub(r"OPTLAB_STORE=\S+", f"OPTLAB_STORE={store}", command)
            assert "6379" not in command and "HEAD" not in command, command
            shell = subprocess.Popen(
                ["bash", "-c", command],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
            sessions.add(shell.pid)
            output = shell.communicate(timeout=scaled(300))[0]
            assert shell.returncode == 0, f"{command}\n{output[-3000:]}"
        listed = subprocess.run(
            [sys.executable, "-m", "core", "runs", "--json", "--store", str(store)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=scaled(120),
        )  # fmt: skip
        [run] = json.loads(listed.stdout)
        assert run["status"] == "completed" and run["node"], run
    finally:
        end_sessions(sessions)
        shutil.rmtree(ray_folder, ignore_errors=True)
