"""Test-session setup shared by every test.

TensorFlow fixes its device list the first time it runs an op, so the two logical CPU
devices that the `tf.distribute` tests need are configured here, before any test imports
a model. On one device nothing else changes: the default strategy uses `CPU:0`.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tempfile

# A PostgreSQL store's checkpoints go here, not into the project's runs/ folder.
os.environ.setdefault("OPTLAB_FILES", tempfile.mkdtemp(prefix="optlab-files-"))
# The plugin files found clean go here, for this session's processes, not into ~/.cache.
os.environ.setdefault("OPTLAB_CACHE", tempfile.mkdtemp(prefix="optlab-cache-"))

# Pages' script runs (Streamlit parses each page) and runs' autograph parse in threads of
# this process: one parse at a time from the start, as `tf_import` arranges in the lab's.
from core.training.ast_lock import serialize_ast_parse

serialize_ast_parse()

import tensorflow as tf  # noqa: E402

_cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    _cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()]
)


import contextlib  # noqa: E402
import functools  # noqa: E402
from collections.abc import Generator, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

from tests import waiting  # noqa: E402

# The files that take about a minute or more (seconds on 2 cores, 2026-12-04), longest
# first. Only the order in which `make test` hands them out depends on it.
LONGEST_FILES = (
    "tests/system/test_population.py",  # 150 (2026-12-07)
    "tests/system/test_watched_runs.py",  # 109
    "tests/system/test_browser.py",  # 99
    "tests/system/test_ray_cluster.py",  # 90
    "tests/system/test_hardening.py",  # 89
    "tests/system/test_checkpoints.py",  # 76
    "tests/system/test_readme.py",  # 75
    "tests/system/test_population_hosting.py",  # 65 (2026-12-07)
    "tests/system/test_app.py",  # 60
    "tests/system/test_cli.py",  # 58
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first, then the other system tests, unit tests last.
    `make test` hands whole files to two workers in this order (without xdist's reordering
    by test count, which handed the 110-s file out last, to run alone); the many short
    unit files then fill the time of whichever worker ends its last system file first."""

    def rank(item: pytest.Item) -> tuple[int, int]:
        path = item.nodeid.partition("::")[0]
        if path in LONGEST_FILES:
            return 0, LONGEST_FILES.index(path)
        return (1 if path.startswith("tests/system/") else 2), 0

    items.sort(key=rank)  # a stable sort: each file's tests keep their order


@pytest.hookimpl(tryfirst=True)  # before pytest-timeout reads its limit
def pytest_configure(config: pytest.Config) -> None:
    """One slowness for the whole session (see `tests.waiting`): measured once, by the
    process that starts the session, and handed to pytest-xdist's workers through the
    environment they inherit. pytest-timeout's limit on a test is a deadline too."""
    os.environ[waiting.SLOWNESS_VARIABLE] = str(waiting.slowness().factor)
    if getattr(config.option, "timeout", None):
        config.option.timeout = waiting.scaled(config.option.timeout)


def pytest_report_header() -> str:
    """The session's slowness, so that a CI log says by how much its deadlines grew."""
    pace = waiting.slowness()
    return f"deadlines x{pace.factor:.2f}, the machine's slowness ({pace.how})"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A test that fails on a timeout raised by a library (Playwright's, a subprocess's,
    a future's) says the slowness its deadline was scaled by, as `tests.waiting`'s own
    failures do."""
    report = yield
    error = call.excinfo.value if call.excinfo else None
    names = {cls.__name__ for cls in type(error).__mro__}
    if report.failed and names & {"TimeoutError", "TimeoutExpired"}:
        pace = waiting.slowness()
        report.sections.append(("deadlines", f"scaled x{pace.factor:.2f} ({pace.how})"))
    return report


@contextlib.contextmanager
def served(path: Path | str, **engine_args: Any) -> Iterator:
    """An engine serving the store at `path` (or URL) in this process, as `python -m core serve`
    serves it in its own (driving the sweeps handed to it); yields the `Engine`. The
    dashboard's client finds it and hands it its runs, and nothing is launched.
    `engine_args` go to the `Engine`."""
    from streamlit.runtime.scriptrunner import script_runner

    from core.engine import Engine
    from core.engine.client import use_engine_plugins
    from core.engine.server import EngineService
    from core.population.hosting import PopulationHost
    from core.sweep.hosting import SweepHost

    engine = Engine(path, **{"max_concurrent": 3, **engine_args})
    # Sweeps are taken up and followed closely, as trials of a test last a second or so.
    host = functools.partial(SweepHost, poll_interval=0.1, sweep_poll_interval=0.05)
    populations = functools.partial(PopulationHost, poll_interval=0.1)
    service = EngineService(engine, warm_up=False, hosts=(host, populations))
    try:
        with pytest.MonkeyPatch.context() as patch:
            # Streamlit ends each script run with `keras.backend.clear_session()` once Keras
            # is imported. The dashboard's process never imports it (its runs train in
            # `python -m core serve`); an engine served in the test's process does, and a
            # page's run cleared the session while runs traced in their threads:
            # TensorFlow crashed (a segfault in CI, test_repeats).
            patch.setattr(script_runner, "_clean_problem_modules", lambda: None)
            yield engine
    finally:
        service.close()
        engine.close()
        use_engine_plugins(None)  # the dashboard's client set them


@contextlib.contextmanager
def app_serving(
    location: str, monkeypatch: pytest.MonkeyPatch, **engine_args: Any
) -> Iterator[None]:
    """The app on the store at `location`, as `OPTLAB_STORE`, served by an in-process
    engine (of `engine_args`), with the app's cached client cleared before and after."""
    import streamlit as st

    monkeypatch.setenv("OPTLAB_STORE", location)
    st.cache_resource.clear()
    with served(location, **engine_args):
        yield
    st.cache_resource.clear()


@pytest.fixture
def app_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The app's store path (see `app_serving`)."""
    path = tmp_path / "lab.sqlite"
    with app_serving(str(path), monkeypatch):
        yield path


@pytest.fixture
def lab(app_store: Path):
    """The app's engine client on a temporary store served in this process, as the
    pages get it from `ui.state`."""
    from ui import state

    return state.shared_engine()


@pytest.fixture(scope="session")
def postgres() -> Iterator:
    """A PostgreSQL server of the test session's own (see `tests.postgres_server`);
    without the server's programs, the tests that need one are skipped, saying how to
    install them."""
    from tests.postgres_server import MISSING, binaries, postgres_server

    if binaries() is None:
        pytest.skip(MISSING)
    with postgres_server() as server:
        yield server


# The fast loop (`make test-fast`) tries the store on SQLite only; `make test` on both.
@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new store's location, once for each backend: a SQLite file's path, and the URL
    of a new schema on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return str(tmp_path / "lab.sqlite")
    return request.getfixturevalue("postgres").create_schema()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless, for a module's end-to-end tests."""
    from tests.browser import chromium

    with chromium() as browser:
        yield browser


@pytest.fixture(scope="module")
def watched_lab() -> Iterator[tuple[Any, str, Any, dict[str, set[int]]]]:
    """The lab as a user runs and watches it, for a module's tests: its engine process
    (warm), `streamlit run app.py` and Chromium, on a fresh store (see
    `bench.watching.lab_with_a_browser`). Yields the engine's client, the app's URL, the
    browser, and the pids of the engine and the page server."""
    from bench.watching import lab_with_a_browser

    with lab_with_a_browser() as lab:
        yield lab
