"""Figure 17: a LeNet run's speed while a room watches it on Live, the presenter's
Chromium tab and 20 viewer sessions (A), against the presenter's tab alone (B).

A viewer is a session of the page server as a browser tab makes one, without the
browser: a websocket to `/_stcore/stream` that asks for the Live page of the run, then
asks for each fragment's rerun at the interval the server gives it (`AutoRerun`), as
Streamlit's frontend does. So the page server does for each viewer what it does for a
tab; what a browser would spend drawing is each viewer's own machine's, not the
server's. The row says how much page-server CPU a refresh took, with the presenter
alone and with the room.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.asyncio.client import ClientConnection, connect

from bench.cores import cpu_seconds
from bench.figures import Settings
from bench.rows import Measured, NotMeasured
from bench.watching import RUN, SETTLE_SECONDS, WINDOW_SECONDS, lab_with_a_browser, steps_per_second
from ui import nav

VIEWERS = 20
# The messages a viewer reads (the page's address, its fragments' intervals, a run's end)
# are a few hundred bytes; the elements (the charts' JSON) are what a browser would draw.
LARGEST_READ = 4096


def rerun(query: str, page_hash: str = "", fragment: str = "") -> bytes:
    """The message a tab sends for a run of the page (or of one of its fragments)."""
    message = BackMsg()
    state = message.rerun_script
    state.query_string = query
    state.page_name = "" if page_hash else nav.LIVE.url_path
    state.page_script_hash = page_hash
    if fragment:
        state.fragment_id = fragment
        state.is_auto_rerun = True
    return message.SerializeToString()


class Room:
    """`count` viewer sessions of the Live page at `url` with query `query`, kept in a
    thread of their own until `close`; `refreshes` counts the script and fragment runs
    the server has finished for them."""

    def __init__(self, url: str, query: str, count: int) -> None:
        self.url, self.query, self.count = url, query, count
        self.refreshes = 0
        self._loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        self._thread = threading.Thread(target=self._run, name="viewers", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self._loop.run_until_complete(self._all())

    async def _all(self) -> None:
        await asyncio.gather(*(self._viewer() for _ in range(self.count)))

    async def _viewer(self) -> None:
        address = urlsplit(self.url)._replace(scheme="ws", path="/_stcore/stream").geturl()
        async with connect(
            address, subprotocols=["streamlit"], origin=self.url, max_size=None
        ) as socket:
            await socket.send(rerun(self.query))
            timers: list[asyncio.Task] = []
            page = ""
            while not self._stop.is_set():
                try:
                    data = await asyncio.wait_for(socket.recv(), 0.5)
                except TimeoutError:
                    continue
                if len(data) > LARGEST_READ:
                    continue  # a page's elements: what a browser draws, never read here
                message = ForwardMsg.FromString(data)
                kind = message.WhichOneof("type")
                if kind == "navigation":
                    page = message.navigation.page_script_hash
                elif kind == "auto_rerun":
                    interval, fragment = message.auto_rerun.interval, message.auto_rerun.fragment_id
                    timers.append(asyncio.create_task(self._tick(socket, page, fragment, interval)))
                elif kind == "script_finished":
                    self.refreshes += 1
            for timer in timers:
                timer.cancel()

    async def _tick(
        self, socket: ClientConnection, page: str, fragment: str, interval: float
    ) -> None:
        while True:
            await asyncio.sleep(interval)
            await socket.send(rerun(self.query, page, fragment))

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)


@contextlib.contextmanager
def room(url: str, query: str, count: int) -> Iterator[Room]:
    viewers = Room(url, query, count)
    try:
        yield viewers
    finally:
        viewers.close()


def presenter_and_room(settings: Settings) -> Measured:
    """Median steps/s of a LeNet run on Live with the presenter's tab and `VIEWERS`
    viewer sessions (A) and with the presenter's tab alone (B)."""
    with lab_with_a_browser() as (client, url, browser, pids):
        run_id = client.start(RUN)
        server = {"page server": pids["page server"]}
        per_refresh: dict[str, list[float]] = {"alone": [], "room": []}
        try:
            presenter = browser.new_page()
            presenter.goto(f"{url}{nav.LIVE.url}?runs={run_id}")
            presenter.wait_for_selector(".js-plotly-plot", timeout=60_000)
            time.sleep(settings.pick(10.0, 6.0))  # past the first traces

            def window(viewers: int) -> float:
                with room(url, f"runs={run_id}", viewers) as watching:
                    time.sleep(SETTLE_SECONDS)  # every viewer's first run done
                    before, refreshes = cpu_seconds(server), watching.refreshes
                    steps = steps_per_second(client, run_id, WINDOW_SECONDS)
                    used = (cpu_seconds(server) - before)["page server"]
                    # The presenter's refreshes too: a chart fragment every 5 s, its
                    # run card's every 2 s.
                    done = watching.refreshes - refreshes + WINDOW_SECONDS * (1 / 5 + 1 / 2)
                    per_refresh["room" if viewers else "alone"].append(used / done)
                return steps

            paired = settings.interleave(lambda: window(VIEWERS), lambda: window(0))
        finally:
            client.settle(client.stop(run_id))
    if not per_refresh["room"]:
        raise NotMeasured("no window with the room was measured")
    alone, crowd = (sorted(v)[len(v) // 2] * 1000 for v in per_refresh.values())
    return Measured.compared(
        paired,
        "steps/s",
        detail=f"Viewers are websocket sessions that ask for reruns as a tab does (see "
        f"bench/viewers.py). Page-server CPU per refresh: {alone:.0f} ms with the "
        f"presenter alone, {crowd:.0f} ms with {VIEWERS} viewers.",
    )
