"""A room for the tests: `optlab present` served on 127.0.0.1, its URLs read from its
banner; and a page's Streamlit session id, as the browser learns it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from core.presenter import KEY_VARIABLE
from tests import app_server
from tests.waiting import wait_for


@dataclass
class Room:
    process: subprocess.Popen
    output: Path
    store: Path
    audience: str
    presenter: str
    key: str

    def dashboard(self) -> psutil.Process:
        """The dashboard's process (`python -m ui.serve`), which `optlab present` started."""
        (child,) = [
            p for p in psutil.Process(self.process.pid).children() if "ui.serve" in p.cmdline()
        ]
        return child


@contextmanager
def served(folder: Path, store: Path) -> Iterator[Room]:
    """`optlab present` on a free port of 127.0.0.1 for `store`, with a key of its own
    making (none in the environment), once its banner is out; stopped, with the engine
    the dashboard launched, on the way out."""
    output = folder / "present.out"
    port = app_server.free_port()
    env = {name: value for name, value in os.environ.items() if name != KEY_VARIABLE}
    flags = ["--address", "127.0.0.1", "--port", str(port), "--store", str(store)]
    process = subprocess.Popen(
        [sys.executable, "-m", "core", "present", *flags],
        cwd=app_server.ROOT,
        env=env,
        stdout=output.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: "Presenter URL" in output.read_text(), 120, "the banner")
        text = output.read_text()
        audience = re.search(r"Audience URL.*?(http://\S+)", text)[1]
        presenter = re.search(r"Presenter URL.*?(http://\S+)", text)[1]
        key = urllib.parse.parse_qs(urllib.parse.urlsplit(presenter).query)["key"][0]
        yield Room(process, output, store, audience, presenter, key)
    finally:
        app_server.end(process)
        app_server.stop_engine(store)


def session_ids(page: Any) -> list[str]:
    """The ids of the Streamlit sessions that `page` opens from now on, each appended as
    the server's first message to it (`NewSession`) arrives: what the page's script would
    put in an upload's address."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    ids: list[str] = []

    def received(payload: bytes | str) -> None:
        if isinstance(payload, bytes):
            message = ForwardMsg.FromString(payload)
            if message.HasField("new_session"):
                ids.append(message.new_session.initialize.session_id)

    page.on("websocket", lambda socket: socket.on("framereceived", received))
    return ids
