"""The engine's threads import TensorFlow one at a time (`core.training.tf_import`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from core.store.paths import PROJECT_ROOT
from tests.waiting import scaled

# Four threads start at once, as the warm-up and the demo race's runs do in a fresh
# engine: one imports Keras first, as the warm-up does, the others TensorFlow, as a run's
# strategies do. Prints the errors they met.
RACE = """
import sys, threading
from core.training import tf_import
locked = sys.argv[1] == "locked"
errors = []
start = threading.Barrier(4)
def thread(first: bool) -> None:
    start.wait()
    try:
        if locked:
            tf_import.load()
        if first:
            import keras
        else:
            from core.training.strategies import make_strategy
    except BaseException as exc:
        errors.append(type(exc).__name__)
threads = [threading.Thread(target=thread, args=(i == 0,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(",".join(errors))
"""


def python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`code` run by a fresh interpreter in the project, its output caught."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=scaled(120),
        check=True,
    )


def errors_of(mode: str) -> str:
    return python(RACE, mode).stdout.strip()


@pytest.mark.slow
def test_threads_that_import_tensorflow_at_once_all_get_it_whole() -> None:
    # Without the lock the race breaks (a deadlock or a half-made module), so this test
    # tells the lock's work from luck; three tries, for a scheduler that spaced them out.
    broke = any(errors_of("unlocked") for _ in range(3))
    assert broke, "the race never broke without the lock"
    assert errors_of("locked") == ""


FROZEN = """
import gc
from core.training import tf_import
tf_import.load()
frozen = gc.get_freeze_count()
class Cycle:
    pass
cycle = Cycle()
cycle.me = cycle  # garbage made after the load: a full collection still frees it
del cycle
tf_import.load()  # loaded already: freezes nothing more
print(frozen, gc.get_freeze_count(), gc.collect())
"""


@pytest.mark.slow
def test_the_loaded_stack_is_frozen_out_of_full_collections_and_later_garbage_is_not() -> None:
    done = python(FROZEN)
    frozen, frozen_after, collected = map(int, done.stdout.split())
    assert frozen > 100_000  # TensorFlow's and Keras's objects, which a full collection skips
    assert frozen_after == frozen and collected >= 1


# An engine measures a run handed to it (`core.training.footprint`, which builds the model
# in Keras) while its warm-up imports TensorFlow: a click on Start in a lab just started.
MEASURED_DURING_WARM_UP = """
import threading
from core.training import tf_import
from core.training.config import RunConfig
from core.training.footprint import footprint
errors = []
start = threading.Barrier(2)
def thread(work) -> None:
    start.wait()
    try:
        work()
    except BaseException as exc:
        errors.append(type(exc).__name__)
config = RunConfig(model="mlp", dataset="digits", optimizer="adamw")
works = (tf_import.load, lambda: footprint(config))
threads = [threading.Thread(target=thread, args=(work,)) for work in works]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(",".join(errors))
"""


@pytest.mark.slow
def test_a_run_measured_while_the_warm_up_imports_tensorflow_breaks_neither() -> None:
    """The warm-up died of a `_DeadlockError` and the run stayed queued for good, when
    the measuring imported Keras beside it."""
    for _ in range(2):  # the race broke one try in two without the lock
        done = python(MEASURED_DURING_WARM_UP)
        assert done.stdout.strip() == "", done.stderr
