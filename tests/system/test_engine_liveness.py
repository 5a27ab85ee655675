"""A live engine is never judged dead while its process holds the store's engine lock
(issue 51: on a machine with load average 17, `client.engine()` returned None while the
engine lived, its heartbeat more than `LIVENESS_SECONDS` late; a dashboard would then
launch a second engine). The engine here serves as `python -m core serve` does, lock
included, in this process, so that the test can hold its heartbeat thread back."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from core.engine import Engine, lock
from core.engine.client import ENGINE, EngineClient
from core.engine.server import EngineService, absolute
from core.store import Store
from core.store.owner import LIVENESS_SECONDS
from tests import planted
from tests.waiting import wait_for


@dataclass
class LateEngine:
    engine: Engine
    service: EngineService
    held: contextlib.ExitStack
    beat: threading.Event  # set: the heartbeat thread beats again
    client: EngineClient
    launched: list[str]  # what the client launched, as the dashboard's `launch` would


@pytest.fixture
def late(tmp_path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LateEngine]:
    """An engine serving a store (holding its lock), whose heartbeat thread waits for
    `beat` before each beat; and a dashboard's client, whose launches are counted."""
    beat = threading.Event()
    heartbeat = EngineService._heartbeat

    def held_back(self: EngineService) -> None:
        beat.wait()
        heartbeat(self)

    monkeypatch.setattr(EngineService, "_heartbeat", held_back)
    path = tmp_path / "lab.sqlite"
    held = lock.hold(absolute(path))
    assert held is not None
    engine = Engine(path, max_concurrent=1)
    service = EngineService(engine, warm_up=False)
    launched: list[str] = []
    client = EngineClient(Store(path), launch=lambda: launched.append("engine"))
    try:
        yield LateEngine(engine, service, held, beat, client, launched)
    finally:
        beat.set()
        client.close()
        service.close()
        engine.close()
        held.close()


def silence(location: str, seconds: float) -> None:
    """The engine's last heartbeat, `seconds` older: as a loaded machine leaves it."""
    planted.write(
        location,
        "UPDATE services SET heartbeat = heartbeat - ? WHERE role = ?",
        (seconds, ENGINE),
    )


def test_a_late_engine_is_still_the_engine_and_no_second_one_is_launched(late) -> None:
    store, owner = late.client.store, late.engine.owner
    store.create_run("training", "training", {}, status="running", owner=owner)
    silence(store.location, 2 * LIVENESS_SECONDS)
    assert owner not in store.beating(ENGINE)  # its heartbeat is late

    found = late.client.ensure_engine(wait=False)  # what the dashboard asks before a start
    assert found is not None and found.owner == owner
    assert late.launched == []  # nothing started beside it
    late.service._take_over()  # the upkeep forgets only the rows of dead services
    assert [service.owner for service in store.services(ENGINE)] == [owner]
    assert late.client.status("training").status == "running"  # nor is its run interrupted
    assert store.mark_interrupted() == []

    # Once its process lets go of the lock (it stops serving), a silent row is no engine's.
    late.held.close()
    assert late.client.engine() is None and store.services(ENGINE) == []
    late.beat.set()  # beating again, it is found again (its row is written anew)
    wait_for(lambda: late.client.engine() is not None, 30, "the engine's next beat")
    assert late.launched == []
