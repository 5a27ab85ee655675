"""What an adversarial review broke (issue 11), each finding reproduced and held fixed.

1. A slow regular expression froze the whole server: layer-rule patterns are RE2
   expressions now, matched in time linear in the path; runs with such rules train while
   the app and the engine answer.
2. Metrics were lost, and the run reported `completed`, when another process held the
   store's write lock for a few seconds: writes now wait for it (`LOCK_PATIENCE`), and a
   run whose metrics could not all be written ends `failed`, naming the lost steps.
3. Plugins could take every entry point down: each file is now tried in a child process
   first; any failure, `SystemExit` included, is reported; links and folders others can
   write to are refused; `runs` and `export` never import plugins.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import keras
import numpy as np
import pytest

from core import optimizers
from core.engine import Engine
from core.knobs import InvalidHyperparameters, LayerRule
from core.store import LOCK_PATIENCE, Store
from tests import app_server
from tests.lean import NO_INSTRUMENTS
from tests.waiting import scaled, wait_for
from ui import nav

# Each takes Python's backtracking `re` exponential time on a long enough text.
CATASTROPHIC = ("(x|x|x|x|x|x)*y", "(x+x+)+y", "(x+)+y", "(.*x){20}y", "((x|xx)+)+y")


def test_catastrophic_patterns_match_in_linear_time() -> None:
    started = time.monotonic()
    for pattern in CATASTROPHIC:
        regex = LayerRule(pattern).regex
        for length in (30, 3_000, 300_000):
            assert regex.search("x" * length) is None
    # Python's `re` takes about a minute for one of them at length 30; at 3,000, ages.
    assert time.monotonic() - started < 5.0


def test_an_optimizer_with_catastrophic_rules_builds_at_once() -> None:
    variables = [keras.Variable([1.0, 2.0], name="x" * 60), keras.Variable([3.0], name="y")]
    for pattern in CATASTROPHIC:
        optimizer = optimizers.build("sgd", layer_rules=[{"pattern": pattern, "lr_mult": 0.5}])
        started = time.monotonic()
        optimizer.build(variables)
        assert time.monotonic() - started < 5.0


# Each freezes Python's `re` on a variable path as short as "mlp/dense1/kernel".
FREEZE_ON_PATHS = ("(.*){25}@", "(.*.*.*.*)*@")


@pytest.mark.slow
def test_runs_with_catastrophic_rules_never_freeze_the_servers(tmp_path) -> None:
    """Runs whose layer rules would freeze a backtracking matcher train to the end, while
    the app's health endpoint answers within 3 s and the engine's heartbeat stays fresh.
    A frozen matcher holds the interpreter for minutes; the bounds leave a loaded machine
    room (idle, the answers took 1.4 ms at the median, 7 ms at most, and the heartbeat was
    at most 1.1 s old)."""
    from core.engine.client import EngineClient
    from core.engine.server import HEARTBEAT_SECONDS

    store = tmp_path / "lab.sqlite"
    engine = app_server.start_engine(store, tmp_path / "engine.log")
    app, port = app_server.start(store, tmp_path / "streamlit.log")
    client = EngineClient(Store(store))
    watched = threading.Event()
    answers: list[float] = []
    stale: list[float] = []

    def watch() -> None:  # every 0.1 s, until the runs have ended
        while not watched.wait(0.1):
            asked = time.monotonic()
            with urllib.request.urlopen(
                f"http://127.0.0.1:{port}/_stcore/health", timeout=scaled(5)
            ):
                answers.append(time.monotonic() - asked)
            service = client.engine()
            stale.append(time.time() - service.heartbeat if service else float("inf"))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        runs = [
            client.start({**RUN, "max_steps": 30, "hyperparameters": {"layer_rules": [rule]}})
            for rule in ({"pattern": p, "lr_mult": 0.5} for p in (*CATASTROPHIC, *FREEZE_ON_PATHS))
        ]
        assert {client.wait(run_id, scaled(180)).status for run_id in runs} == {"completed"}
    finally:
        watched.set()
        watcher.join(scaled(10))
        client.close()
        app_server.stop(app)
        app_server.end(engine)
    assert len(answers) > 10 and max(answers) < 3.0, max(answers)
    assert max(stale) < 5 * HEARTBEAT_SECONDS + 2.0, max(stale)


@pytest.mark.parametrize("pattern", [r"(a)\1", "(?=dense)", "(?<!bias)kernel"])
def test_patterns_re2_cannot_match_are_refused_saying_why(pattern: str) -> None:
    with pytest.raises(InvalidHyperparameters) as refused:
        optimizers.build("sgd", layer_rules=[{"pattern": pattern}])
    assert "layer_rules" in refused.value.errors
    assert "RE2" in refused.value.errors["layer_rules"]


# 2. A write lock held by another process ---------------------------------------------------

HOLD_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
"""
RUN = {"dataset": "digits", "model": "mlp", "optimizer": "sgd", "log_every": 1, **NO_INSTRUMENTS}


@contextmanager
def lock_held(path: Path, seconds: float) -> Iterator[list[float]]:
    """Another process holds the store's write lock for `seconds` from entering; yields
    a list that holds when it took the lock and, after the block, when it let go."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(path), str(seconds)], stdout=subprocess.PIPE
    )
    assert holder.stdout is not None and holder.stdout.readline() == b"locked\n"
    times = [time.time()]
    try:
        yield times
    finally:
        holder.wait(seconds + scaled(30))
        times.append(time.time())


def wait_for_steps(engine: Engine, run_id: str, steps: int) -> None:
    wait_for(lambda: len(engine.metrics(run_id)) >= steps, 120, f"{steps} steps stored")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("seconds", "steps", "ends_under_lock"),
    [(3.0, 400, False), (30.0, 1200, True)],  # mid-run; over the last step and validation
    ids=["3 s mid-run", "30 s over the last step"],
)
def test_a_run_outlasts_a_held_lock_with_every_metric(
    tmp_path, seconds, steps, ends_under_lock
) -> None:
    path = tmp_path / "lab.sqlite"
    engine = Engine(path, max_concurrent=1)
    try:
        run_id = engine.start({**RUN, "max_steps": steps, "epochs": 100})
        wait_for_steps(engine, run_id, 50)
        with lock_held(path, seconds) as held:
            pass
        status = engine.wait(run_id, scaled(120))
        assert status.status == "completed", status.error
        metrics = engine.metrics(run_id)
        assert metrics.steps.tolist() == list(range(1, steps + 1))
        assert not np.isnan(metrics["val_accuracy"][-1])
        if ends_under_lock:  # the last step (and the validation after it) ran under the lock
            locked, released = held
            assert locked < metrics["wall_time"][-1] < released
    finally:
        engine.close()


def test_metrics_that_could_not_be_written_fail_the_run_naming_them(tmp_path) -> None:
    """With less patience than the lock lasts, the run ends `failed`, saying which steps
    were lost, and never `completed` (its final status waits and is written after)."""
    path = tmp_path / "lab.sqlite"
    engine = Engine(Store(path, timeout=0.5), max_concurrent=1)
    try:
        run_id = engine.start({**RUN, "max_steps": 2000, "epochs": 100})
        wait_for_steps(engine, run_id, 50)
        with lock_held(path, 4.0):
            status = engine.wait(run_id, scaled(60))
        assert status.status == "failed"
        assert "not saved" in status.error and "database is locked" in status.error, status.error
    finally:
        engine.close()
    with Store(path) as store:
        assert store.get_run(run_id).status == "failed"
    assert LOCK_PATIENCE >= 30  # the default outlasts the 30 s lock above


# 3. Plugins that hang, loop, exit, or are not the lab's to load -----------------------------

GOOD_PLUGIN = """
from core.optimizers import SGD, register

@register("hardening_good", summary="Plain SGD.", update_rule="θ ← θ − η·g")
class HardeningGood(SGD):
    pass
"""


def plugins_folder(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "plugins"
    folder.mkdir(mode=0o755)
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text))
    return folder


def test_runs_and_export_never_import_plugins(tmp_path) -> None:
    folder = plugins_folder(tmp_path, {"loops.py": "while True:\n    pass\n"})
    store = tmp_path / "lab.sqlite"
    Store(store).close()
    for command in (["runs"], ["runs", "--json"], ["train", "--help"]):
        done = subprocess.run(
            [sys.executable, "-m", "core", *command, "--store", str(store)],
            cwd=Path(__file__).resolve().parents[2],
            env={**os.environ, "OPTLAB_PLUGINS": str(folder)},
            capture_output=True,
            timeout=scaled(60),
        )
        assert done.returncode == 0, command


def test_a_plugin_that_hangs_or_exits_is_reported_and_skipped(tmp_path) -> None:
    from core.optimizers import registry

    folder = plugins_folder(
        tmp_path,
        {
            # Waits as on a server that never answers (one that spins is tried below, with
            # a 3-s deadline: this one's 20 s or more would take a core from the other tests).
            "hangs.py": "import threading\nthreading.Event().wait()\n",
            "exits.py": "import sys\nsys.exit('no thanks')\n",
            "good.py": GOOD_PLUGIN,
        },
    )
    started = time.monotonic()
    errors = registry.load_plugins(folder)
    elapsed = time.monotonic() - started
    # The deadline follows the machine (issue 51: under load, the good plugin took more
    # than a fixed 20 s): four times the child's import of Keras, and at least 20 s.
    said = re.fullmatch(
        r"did not finish importing within ([\d.]+) s \((?:the floor; )?4x the ([\d.]+) s this"
        r" machine took to import keras in the same child process(?: is less)?\)",
        errors[str(folder / "hangs.py")],
    )
    assert said, errors[str(folder / "hangs.py")]
    seconds, keras_seconds = map(float, said.groups())
    assert seconds == pytest.approx(max(20.0, 4 * keras_seconds), abs=0.3)
    assert elapsed < 3 * seconds  # one hang costs its deadline, once
    assert "no thanks" in errors[str(folder / "exits.py")]
    assert str(folder / "good.py") not in errors
    assert optimizers.get_spec("hardening_good").source.endswith("good.py")
    assert "optlab_plugins.exits" not in sys.modules  # not counted as loaded


def test_one_child_tries_every_file_and_a_new_one_those_after_a_hang_or_a_crash(
    tmp_path,
) -> None:
    from core.optimizers import probe

    folder = plugins_folder(
        tmp_path,
        {
            "a_fine.py": "X = 1\n",
            "b_loops.py": "while True:\n    pass\n",
            "c_chatty.py": "print('ok 0')\nprint('failed 3 lies')\n",
            "d_dies.py": "import os\nos._exit(3)\n",
            "e_raises.py": "raise ValueError('no')\n",
            "f_fine.py": "Y = 2\n",
        },
    )
    paths = sorted(folder.glob("*.py"))
    started = time.monotonic()
    results = {
        path.name: why for path, why in probe.probe(paths, probe.Deadline(floor=3.0)).items()
    }
    assert time.monotonic() - started < 15  # one hang costs its deadline, once
    assert results == {
        "a_fine.py": None,
        "b_loops.py": "did not finish importing within 3 s (tried in a child process)",
        "c_chatty.py": None,  # what a plugin prints is not taken for a verdict
        "d_dies.py": "failed to import: the process ended (exit status 3)",
        "e_raises.py": "failed to import: ValueError: no",
        "f_fine.py": None,
    }


def test_links_and_folders_others_can_write_are_refused(tmp_path) -> None:
    from core.optimizers import registry

    outside = tmp_path / "outside.py"
    outside.write_text(GOOD_PLUGIN.replace("hardening_good", "hardening_linked"))
    folder = plugins_folder(tmp_path, {})
    (folder / "linked.py").symlink_to(outside)
    errors = registry.load_plugins(folder)
    assert "is a link" in errors[str(folder / "linked.py")]
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (shared / "any.py").write_text(GOOD_PLUGIN.replace("hardening_good", "hardening_shared"))
    errors = registry.load_plugins(shared)
    assert "can be written by other users" in errors[str(shared)]
    with pytest.raises(InvalidHyperparameters):
        optimizers.get_spec("hardening_shared")


def test_broken_plugins_are_reported_on_the_optimizers_page_and_in_the_cli(
    tmp_path, monkeypatch, request
) -> None:
    from tests.apptest import page

    folder = plugins_folder(
        tmp_path,
        {
            "exits.py": "import sys\nsys.exit('no thanks')\n",
            "raises.py": "1 / 0\n",
            "no_data.py": """
                from core.data import register_dataset

                @register_dataset("hardening_no_data", description="its data is gone")
                def gone():
                    raise FileNotFoundError("/data/gone.npz")
            """,
        },
    )
    monkeypatch.setenv("OPTLAB_PLUGINS", str(folder))
    request.getfixturevalue("lab")  # the app's engine, serving in this process, loads them
    at = page(nav.OPTIMIZERS).run()
    assert not at.exception
    shown = [error.value.replace("\\", "") for error in at.error]  # Markdown escapes
    assert any("exits.py" in text and "no thanks" in text for text in shown), shown
    assert any("raises.py" in text and "ZeroDivisionError" in text for text in shown), shown
    assert any(
        "no_data.py" in text and "dataset 'hardening_no_data'" in text and "gone.npz" in text
        for text in shown
    ), shown

    done = subprocess.run(
        [sys.executable, "-m", "core", "train", "--dataset", "not_built_in", "--help"],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "OPTLAB_PLUGINS": str(folder)},
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: plugin")]
    assert any("exits.py" in w and "no thanks" in w for w in warnings), done.stderr
    assert any("raises.py" in w and "ZeroDivisionError" in w for w in warnings), done.stderr
    assert any("no_data.py" in w and "FileNotFoundError" in w for w in warnings), done.stderr
