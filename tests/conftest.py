"""Test-session setup shared by every test.

TensorFlow fixes its device list the first time it runs an op, so the two logical CPU
devices that the `tf.distribute` tests need are configured here, before any test imports
a model. On one device nothing else changes: the default strategy uses `CPU:0`.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

_cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    _cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()]
)


import contextlib  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402


@contextlib.contextmanager
def served(path: Path) -> Iterator:
    """An engine serving the store at `path` in this process, as `python -m core serve`
    serves it in its own; yields the `Engine`. The dashboard's client finds it and hands
    it its runs, and nothing is launched."""
    from core.engine import Engine
    from core.engine.client import use_engine_plugins
    from core.engine.server import EngineService

    engine = Engine(path, max_concurrent=3)
    service = EngineService(engine, warm_up=False)
    try:
        yield engine
    finally:
        service.close()
        engine.close()
        use_engine_plugins(None)  # the dashboard's client set them


@pytest.fixture
def app_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The app's store path, as `OPTLAB_STORE`, served by an in-process engine, with the
    app's cached client cleared before and after."""
    import streamlit as st

    path = tmp_path / "lab.sqlite"
    monkeypatch.setenv("OPTLAB_STORE", str(path))
    st.cache_resource.clear()
    with served(path):
        yield path
    st.cache_resource.clear()


@pytest.fixture
def lab(app_store: Path):
    """The app's engine client on a temporary store served in this process, as the
    pages get it from `ui.state`."""
    from ui import state

    return state.shared_engine()
