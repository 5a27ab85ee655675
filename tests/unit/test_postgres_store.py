"""What a PostgreSQL store adds to the behaviour every store has (tested on both backends
in test_store.py): writers taking turns across processes, and a server that goes away."""

import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from core.store import Store, StoreError
from core.store.postgres import WRITE_LOCK
from tests.postgres_server import MISSING, binaries, postgres_server
from tests.waiting import scaled, wait_for


def test_a_write_waits_for_another_process_holding_the_store_and_then_fails(postgres):
    """The store's advisory lock is its write lock: a write waits for it (here 0.3 s) and
    then fails with the reason; the metrics writer names the steps it lost."""
    url = postgres.create_database()
    store = Store(url, timeout=0.3)
    store.create_run("r", "r", {})
    writer = store.metrics_writer("r", flush_interval=60)
    with psycopg.connect(url) as blocker:  # a transaction of another process
        blocker.execute(f"SELECT {WRITE_LOCK}")
        start = time.monotonic()
        with pytest.raises(StoreError, match="lock timeout"):
            store.add_event("r", 0, "note")
        assert 0.25 < time.monotonic() - start < 5
        writer.append(0, {"loss": 1.0})
        with pytest.raises(StoreError, match=r"run 'r' \(step 0 lost\).*lock timeout"):
            writer.flush()
    store.close()


def test_a_write_goes_through_once_the_other_process_lets_go(postgres):
    """The other transaction lets go of the lock once the server shows the write waiting
    for it (pg_locks), then the write goes through."""
    url = postgres.create_database()
    with Store(url, timeout=scaled(10)) as store, ThreadPoolExecutor(1) as writes:
        store.create_run("r", "r", {})
        with psycopg.connect(url) as blocker:  # its transaction ends with the block
            blocker.execute(f"SELECT {WRITE_LOCK}")
            write = writes.submit(store.add_event, "r", 0, "note")
            waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            wait_for(lambda: blocker.execute(waiting).fetchone()[0], 10, "the write to wait")
        write.result(scaled(10))
        assert [e.kind for e in store.events("r")] == ["note"]


@pytest.mark.slow  # a server of its own, stopped and started
@pytest.mark.skipif(binaries() is None, reason=MISSING)
def test_a_server_that_goes_away_loses_nothing_silently():
    """Mid-run the server stops: the metrics writer fails naming the steps it could not
    save, the run's final status is kept in memory (and read back so), and it is written
    once the server is back."""
    with postgres_server() as server:
        url = server.create_database()
        store = Store(url, timeout=2)
        store.create_run("r", "r", {}, status="running")
        writer = store.metrics_writer("r", flush_interval=60)
        for step in range(5):
            writer.append(step, {"loss": 1.0 / (step + 1)})
        writer.flush()
        server.stop()
        for step in range(5, 8):
            writer.append(step, {"loss": 0.1})
        with pytest.raises(StoreError, match=r"steps 5 to 7 lost"):
            writer.flush()
        with pytest.raises(StoreError, match="steps 5 to 7 lost"):
            writer.close()
        store.finish("r", "failed", {"steps": 5}, error="its metrics could not be saved")
        with pytest.raises(StoreError, match="cannot read"):
            store.get_run("r")
        server.start()
        assert store.get_run("r").status == "failed"  # kept in memory, not written yet
        store.add_event("r", 5, "note")  # any write writes the kept status first
        store.close()
        with Store(url) as reopened:
            run = reopened.get_run("r")
            assert (run.status, run.error) == ("failed", "its metrics could not be saved")
            assert list(reopened.read_metrics("r").steps) == [0, 1, 2, 3, 4]
