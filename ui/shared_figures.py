"""Live's charts, drawn once a refresh for every session of the page server.

A room watching a demo is one presenter and twenty viewers whose tabs refresh the same
runs' charts. Each refresh read the runs' metrics, built the figures and wrote them as
JSON, once a session, on the cores the runs train on. Here a refresh's charts are kept
under what they show (the runs, each at its last logged step, and how the session draws
them), so the first session to ask after a new step draws them, and every other one that
asks before the next takes the same JSON.

Bounded: the most recently asked `LIMIT` drawings stay. Sessions that ask at once for a
drawing not yet made wait for the one that makes it, rather than each making it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Final

#: Drawings kept: a room's few views (a group of charts, a range, charts a row) over a few
#: selections, each a few MB at most.
LIMIT: Final = 32

Drawing = dict[str, str]  # chart key -> its figure as JSON

_lock = threading.Lock()
_drawings: OrderedDict[Hashable, Future[Drawing]] = OrderedDict()


def shared(key: Hashable, draw: Callable[[], Drawing]) -> Drawing:
    """The drawing under `key`, drawn by `draw` if no session has drawn it yet (or by the
    session drawing it now, waited for). A drawing that failed is forgotten, so the next
    refresh tries again; its error is raised to every session that waited for it."""
    with _lock:
        future = _drawings.get(key)
        mine = future is None
        if future is None:
            future = _drawings[key] = Future()
        _drawings.move_to_end(key)
        while len(_drawings) > LIMIT:
            _drawings.popitem(last=False)
    if mine:
        try:
            future.set_result(draw())
        except BaseException as error:
            future.set_exception(error)
            with _lock:
                if _drawings.get(key) is future:
                    del _drawings[key]
    return future.result()


def forget() -> None:
    """Drops every drawing (for tests)."""
    with _lock:
        _drawings.clear()
