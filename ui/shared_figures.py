"""Live's charts, drawn once a refresh for every session of the page server.

A room watching a demo is one presenter and twenty viewers whose tabs refresh the same
runs' charts. Each refresh read the runs' metrics, built the figures and wrote them as
JSON, once a session, on the cores the runs train on. Here a refresh's charts are kept
under what they show (the runs, and how the session draws them) with how far the runs had
logged: the first session to ask draws them, and every other one that asks before the
runs log further, or within `FRESH_SECONDS` of the drawing, takes the same JSON.

Bounded: the most recently asked `LIMIT` drawings stay. Sessions that ask at once for a
drawing not yet made wait for the one that makes it, rather than each making it.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Final

#: Drawings kept: a room's few views (a group of charts, a range, charts a row) over a few
#: selections, each a few MB at most.
LIMIT: Final = 32
#: How long a drawing serves the sessions that ask for the same view at a newer step: a
#: run logs many steps a second, and a room's sessions refresh at their own moments, so a
#: drawing keyed by the step alone served hardly any other session. A chart is then at
#: most this much older than the store, beside its five seconds between refreshes.
FRESH_SECONDS: Final = 2.0

Drawing = dict[str, str]  # chart key -> its figure as JSON


@dataclass
class _Kept:
    version: Hashable  # what the drawing shows: the runs' last logged steps
    made: float = field(default_factory=time.monotonic)
    drawing: Future[Drawing] = field(default_factory=Future)

    def serves(self, version: Hashable, fresh_for: float) -> bool:
        """Whether this drawing serves a session asking for `version`: the same, or one
        being drawn now, or one drawn less than `fresh_for` seconds ago."""
        young = time.monotonic() - self.made < fresh_for
        return version == self.version or not self.drawing.done() or young


_lock = threading.Lock()
_kept: OrderedDict[Hashable, _Kept] = OrderedDict()


def shared(
    view: Hashable,
    version: Hashable,
    draw: Callable[[], Drawing],
    fresh_for: float | None = None,
) -> Drawing:
    """The drawing of `view` (what is shown, and how) at `version` (how far its runs have
    logged), drawn by `draw` unless one kept serves (see `_Kept.serves`). A drawing that
    failed is forgotten, so the next refresh tries again; its error is raised to every
    session that waited for it.

    Args:
        view: What the charts show and how: the key the drawing is kept under (Live
            passes its group of charts, step range, charts a row and the runs shown).
        version: How far the runs have logged (their last logged steps): a drawing of
            another version serves only while it is fresh.
        draw: Makes the drawing, chart key to figure JSON; called by one session only.
        fresh_for: Seconds a drawing serves a newer version (default `FRESH_SECONDS`);
            0 while a run's first point is awaited, so that each refresh draws anew.
    """
    fresh_for = FRESH_SECONDS if fresh_for is None else fresh_for
    with _lock:
        kept = _kept.get(view)
        mine = kept is None or not kept.serves(version, fresh_for)
        if kept is None or mine:
            kept = _kept[view] = _Kept(version)
        _kept.move_to_end(view)
        while len(_kept) > LIMIT:
            _kept.popitem(last=False)
    if mine:
        try:
            kept.drawing.set_result(draw())
        except BaseException as error:
            kept.drawing.set_exception(error)
            with _lock:
                if _kept.get(view) is kept:
                    del _kept[view]
    return kept.drawing.result()


def forget() -> None:
    """Drops every drawing (for tests)."""
    with _lock:
        _kept.clear()
