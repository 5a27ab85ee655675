"""Load: many start/stop cycles leak no thread, file handle or memory; four runs train at
once with twenty queued while ten clients poll, and every run completes in queue order.

The numbers measured are printed (run with `-s` to see them).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.engine import Engine
from core.store import MetricsWriter
from core.store.paths import PROJECT_ROOT
from tests.lean import NO_INSTRUMENTS
from tests.threads import settle_releases
from tests.waiting import scaled, wait_for

FAST = {
    "dataset": "digits",
    "model": "mlp",
    "optimizer": "sgd",
    "hyperparameters": {"learning_rate": 0.1},
}
WARM_UP = 10
CYCLES = 25


def _trim() -> None:
    """Hand freed heap back to the system (glibc), so RSS counts live memory only."""
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


@dataclass(frozen=True)
class Usage:
    threads: int
    file_handles: int
    rss_mib: float
    objects: int
    metrics_writers: int

    @classmethod
    def now(cls) -> Usage:
        settle_releases()
        gc.collect()
        _trim()
        objects = gc.get_objects()
        return cls(
            threads=threading.active_count(),
            file_handles=len(os.listdir("/proc/self/fd")),
            rss_mib=rss_mib(),
            objects=len(objects),
            metrics_writers=sum(isinstance(o, MetricsWriter) for o in objects),
        )


def measured_cycles(folder: Path) -> tuple[Usage, Usage]:
    """Usage after `WARM_UP` start/stop cycles and after `CYCLES` more; each cycle starts a
    run, waits for its first trained step, stops it and waits for it to end."""
    engine = Engine(folder / "lab.sqlite", max_concurrent=2)
    try:

        def cycle() -> None:
            run_id = engine.start({**FAST, "epochs": 10_000})
            wait_for(lambda: engine.status(run_id).step >= 1, 60, "the run never stepped")
            engine.stop(run_id)
            assert engine.wait(run_id, scaled(30)).status == "stopped"

        for _ in range(WARM_UP):
            cycle()
        before = Usage.now()
        started = time.monotonic()
        for _ in range(CYCLES):
            cycle()
        after = Usage.now()
        seconds = time.monotonic() - started
        assert len(engine.list()) == WARM_UP + CYCLES
    finally:
        engine.close()
    print(
        f"{CYCLES} start/stop cycles in {seconds:.0f} s: threads {before.threads} → "
        f"{after.threads}, file handles {before.file_handles} → {after.file_handles}, RSS "
        f"{before.rss_mib:.0f} → {after.rss_mib:.0f} MiB "
        f"({(after.rss_mib - before.rss_mib) / CYCLES:+.2f} MiB/cycle), Python objects "
        f"{before.objects} → {after.objects} ({(after.objects - before.objects) / CYCLES:+.0f}"
        f"/cycle), metrics writers alive {before.metrics_writers} → {after.metrics_writers}"
    )
    return before, after


# The cycles, in a process of their own; prints their usage as JSON, last.
CYCLES_SCRIPT = """
import dataclasses, json, sys
from pathlib import Path
from tests.system.test_load import measured_cycles
usage = measured_cycles(Path(sys.argv[1]))
print(json.dumps([dataclasses.asdict(u) for u in usage]))
"""


@pytest.fixture(scope="module")
def cycles(tmp_path_factory: pytest.TempPathFactory) -> tuple[Usage, Usage]:
    """`measured_cycles` in a new process: a test worker that has trained hundreds of runs
    before has a heap that grows by fragmentation alone (28 MiB over the 25 cycles in one
    such worker, whose Python objects grew by 204; −0.09 MiB a cycle in a process of its
    own)."""
    done = subprocess.run(
        [sys.executable, "-c", CYCLES_SCRIPT, str(tmp_path_factory.mktemp("cycles"))],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=scaled(900),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    *said, usage = done.stdout.splitlines()
    print("\n" + "\n".join(said))
    before, after = (Usage(**fields) for fields in json.loads(usage))
    return before, after


@pytest.mark.slow
def test_start_stop_cycles_leak_no_thread_file_handle_or_writer(
    cycles: tuple[Usage, Usage],
) -> None:
    """After 25 start/stop cycles (past 10 warm-up ones) as many threads and file handles
    are open as before, and no ended run's metrics writer is kept alive."""
    before, after = cycles
    assert after.threads == before.threads
    assert after.file_handles <= before.file_handles + 2  # the pool may keep a connection
    assert after.metrics_writers == before.metrics_writers <= 1  # at most the last one


@pytest.mark.slow
def test_start_stop_cycles_leak_no_memory(cycles: tuple[Usage, Usage]) -> None:
    """After 25 start/stop cycles (past 10 warm-up ones) live memory has not grown with
    them: under 100 Python objects and 2 MiB a cycle (a kept graph is ~2,000 and ~3 MiB).
    The heap alone moved by 0.4 to 1.2 MiB a cycle, in a process of its own and with its
    Python objects flat (with and without the stack frozen: see `core.training.tf_import`), so a
    bound of 1 MiB failed without a leak."""
    before, after = cycles
    assert after.objects - before.objects < 100 * CYCLES
    assert after.rss_mib - before.rss_mib < 2.0 * CYCLES


@pytest.mark.slow
def test_four_at_once_twenty_queued_ten_pollers_all_complete_in_order(tmp_path: Path) -> None:
    """24 tiny runs on an engine that trains 4 at once, while 10 threads poll `metrics`,
    `list` and `status`: every run completes with all its steps, none is lost, at most 4
    train at any time, the queue only ever holds the latest submissions (FIFO), and no
    run starts before enough earlier ones have ended to give it a slot."""
    engine = Engine(tmp_path / "lab.sqlite", max_concurrent=4)
    tiny = {**FAST, **NO_INSTRUMENTS, "max_steps": 20, "log_every": 5}
    ids = [engine.start({**tiny, "seed": i}) for i in range(24)]
    done = threading.Event()
    errors: list[BaseException] = []
    calls = [0] * 10
    queues: list[list[str]] = []
    most_training = [0]

    def poll(index: int) -> None:
        try:
            while not done.is_set():
                run_id = ids[calls[index] % len(ids)]
                engine.metrics(run_id, since_step=calls[index] % 7 or None)
                statuses = [status.status for status in engine.list()]
                engine.status(run_id)
                most_training[0] = max(most_training[0], statuses.count("running"))
                with engine._lock:  # the engine's queue, as one consistent snapshot
                    queues.append(list(engine._queue))
                calls[index] += 1
                # Ten times a second each: 100 reads a second in all, a hundred tabs'
                # worth. At 50 a second each, the pollers held the GIL most of the time
                # and the 24 runs took 98 s instead of 61.
                done.wait(0.1)
        except BaseException as exc:  # any failure of a poller fails the test
            errors.append(exc)

    pollers = [threading.Thread(target=poll, args=(i,)) for i in range(10)]
    started = time.monotonic()
    try:
        for poller in pollers:
            poller.start()
        for run_id in ids:
            engine.wait(run_id, scaled(240))
        elapsed = time.monotonic() - started
    finally:
        done.set()
        for poller in pollers:
            poller.join(scaled(30))
        runs = {run.id: run for run in engine.list()}
        engine.close()

    assert not errors, errors
    assert min(calls) > 0
    assert set(runs) == set(ids)
    assert {runs[run_id].status for run_id in ids} == {"completed"}
    assert all(runs[run_id].step == 20 for run_id in ids)
    assert 1 <= most_training[0] <= 4
    for queue in queues:  # always the last submissions, in submission order
        assert queue == ids[len(ids) - len(queue) :]
    # From the store's own times: at most 4 overlap, and run j (j ≥ 4) started only after
    # the (j − 3)th run to end had ended (a later run taking an earlier one's turn would not).
    started_at = [runs[run_id].started for run_id in ids]
    finished_at = sorted(runs[run_id].finished for run_id in ids)
    for j, start in enumerate(started_at):
        overlapping = sum(runs[r].started <= start < runs[r].finished for r in ids)
        assert overlapping <= 4
        if j >= 4:
            assert start >= finished_at[j - 4], j
    print(
        f"\n24 runs, 4 at once, 10 pollers: {elapsed:.0f} s, {sum(calls)} polls, "
        f"{len(queues)} queue snapshots, most `running` in one engine.list() "
        f"{most_training[0]}"
    )


def test_list_never_shows_more_runs_training_than_the_engine_allows(tmp_path: Path) -> None:
    """With one run at a time, `Engine.list()` never shows two `running`, even when a run
    ends and the next starts while the list is being read."""
    engine = Engine(tmp_path / "lab.sqlite", max_concurrent=1)
    try:
        first = engine.start({**FAST, "epochs": 10_000})
        second = engine.start({**FAST, "epochs": 10_000})
        wait_for(lambda: engine.store.get_run(first).status == "running", 60)
        read_records = engine.store.list_runs

        def slow_read(**reading: object) -> list:
            records = read_records(**reading)  # `first` is running, `second` queued
            engine.stop(first)  # and now `second` takes its turn
            wait_for(lambda: engine.store.get_run(second).status == "running", 60)
            return records

        engine.store.list_runs = slow_read  # type: ignore[method-assign]
        statuses = {run.id: run.status for run in engine.list()}
        del engine.store.list_runs
        engine.stop(second)
        assert list(statuses.values()).count("running") <= 1, statuses
    finally:
        engine.close()
