"""A Keras user's habit: `import core.optimizers`, then `keras.models.load_model(...)` reads
a model saved with one of the lab's optimizers inside, the plugins' too, in a fresh process
and whichever of the two imports comes first."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.waiting import scaled

ROOT = Path(__file__).resolve().parents[2]

SAVE = """
import sys
import keras
import numpy as np
from core import optimizers

optimizers.load_plugins()
x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
y = (x[:, 0] > 0).astype("int32")
for name in ("adamw", "momentum", "scaled_sign_gd"):
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizers.build(name, learning_rate=0.01), "sparse_categorical_crossentropy")
    model.fit(x, y, epochs=1, verbose=0)
    model.save(f"{sys.argv[1]}/{name}.keras")
"""

LOAD = """
import sys
{imports}
for name in ("adamw", "momentum", "scaled_sign_gd"):
    model = keras.models.load_model(f"{{sys.argv[1]}}/{{name}}.keras")
    print(name, type(model.optimizer).__name__, int(model.optimizer.iterations.numpy()))
"""


def python(script: str, folder: Path) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "OPTLAB_PLUGINS": str(ROOT / "plugins"),  # the example plugins, scaled_sign_gd among them
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), str(folder)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment,
        timeout=scaled(300),
    )


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("saved")
    done = python(SAVE, folder)
    assert done.returncode == 0, done.stderr
    return folder


@pytest.mark.parametrize(
    "imports", ["import core.optimizers\nimport keras", "import keras\nimport core.optimizers"]
)
def test_keras_loads_the_labs_models_once_the_package_is_imported(saved, imports) -> None:
    done = python(LOAD.format(imports=imports), saved)
    assert done.returncode == 0, done.stderr
    loaded = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert loaded == {
        "adamw": "Adam 2",
        "momentum": "Momentum 2",
        "scaled_sign_gd": "ScaledSignGD 2",
    }


def test_without_the_package_keras_cannot_load_them(saved) -> None:
    done = python(LOAD.format(imports="import keras"), saved)
    assert done.returncode != 0 and "Could not locate class 'Adam'" in done.stderr


def test_a_plugin_is_imported_once_in_its_probe_and_once_here(tmp_path) -> None:
    """The probe that tries a plugin file imports `core.optimizers` and Keras too: it must
    not load, and so probe, the plugins folder again."""
    folder, log = tmp_path / "plugins", tmp_path / "imports.log"
    folder.mkdir()
    (folder / "counted.py").write_text(
        textwrap.dedent(f"""
            import os
            import keras
            import core.optimizers
            with open({str(log)!r}, "a") as file:
                file.write(f"{{os.getpid()}}\\n")
        """)
    )
    done = subprocess.run(
        [sys.executable, "-c", "import core.optimizers\nimport keras"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "OPTLAB_PLUGINS": str(folder),
            "OPTLAB_CACHE": str(tmp_path / "cache"),
            "TF_CPP_MIN_LOG_LEVEL": "3",
        },
        timeout=scaled(300),
    )
    assert done.returncode == 0, done.stderr
    assert len(set(log.read_text().split())) == 2  # the probe's process, then this one
