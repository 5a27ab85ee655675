"""Starting the real app (`streamlit run app.py`) for tests that need a server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from core.processes import end
from tests.waiting import met_within, overdue

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
# Debian's chromium in a headless container, with no background traffic (see the guide).
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(
    store: Path,
    log: Path,
    *,
    address: str | None = "127.0.0.1",
    command: tuple[str, ...] = ("-m", "ui.serve"),
    env: dict[str, str] | None = None,
    port: int | None = None,
) -> tuple[subprocess.Popen, int]:
    """`streamlit run app.py` as `make run` starts it (`python -m ui.serve run app.py`) on
    a free port (or `port`) with `store` as `OPTLAB_STORE`, once its health check
    answers; fails the test if it does not within 90 nominal seconds.

    `address=None` leaves the listening address to the config; `command` replaces
    `-m ui.serve` (e.g. `-c CODE` that patches something and then runs Streamlit's CLI).
    """
    port = port or free_port()
    flags = ["--server.headless", "true", "--server.port", str(port)]
    if address is not None:
        flags += ["--server.address", address]
    process = subprocess.Popen(
        [sys.executable, *command, "run", "app.py", *flags],
        cwd=ROOT,
        env={**os.environ, "OPTLAB_STORE": str(store), **(env or {})},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )

    def healthy() -> bool:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{port}/_stcore/health", timeout=2
            ) as response:
                return response.read() == b"ok"
        except OSError:
            return False

    started(process, healthy, 90, "streamlit's health check", log)
    return process, port


def started(
    process: subprocess.Popen, ready: Callable[[], object], timeout: float, what: str, log: Path
) -> None:
    """Waits for `ready` while `process` lives, up to `timeout` nominal seconds; else ends
    it and fails the test, saying whether it exited or was too slow, and naming its `log`."""
    met = met_within(lambda: process.poll() is not None or ready(), timeout, interval=0.2)
    status = process.poll()
    if met and status is None:
        return
    process.kill()
    why = overdue(what, timeout) if status is None else f"{what}: it exited with {status}"
    pytest.fail(f"{why}; see {log}")


def stop(process: subprocess.Popen, store: Path | None = None) -> None:
    """Stops the app, then the engine process serving `store` (the app launched it)."""
    end(process)
    if store is not None:
        stop_engine(store)


def start_engine(
    store: Path,
    log: Path,
    *,
    command: tuple[str, ...] = ("-m", "core"),
    max_concurrent: int = 3,
) -> subprocess.Popen:
    """`python -m core serve` for `store`, once it serves it (an app started next finds
    it and launches none); fails the test if it does not within 60 nominal seconds."""
    process = subprocess.Popen(
        [
            sys.executable,
            *command,
            "serve",
            "--store",
            str(store),
            "--max-concurrent",
            str(max_concurrent),
        ],
        cwd=ROOT,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    started(process, lambda: serving_engine(store) is not None, 60, "the engine to serve", log)
    return process


def serving_engine(store: Path) -> int | None:
    """The pid of the live engine process that serves `store`, if any."""
    from core.engine.server import lock_path
    from core.store import owner

    try:
        holder = lock_path(store.resolve()).read_text().strip()
    except OSError:
        return None
    return int(holder.split(":")[1]) if holder and owner.alive(holder) else None


def stop_engine(store: Path) -> None:
    """Stops the engine serving `store`, if one does: SIGTERM, then SIGKILL after 15
    nominal seconds."""
    pid = serving_engine(store)
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    if not met_within(lambda: serving_engine(store) != pid, 15, interval=0.1):
        os.kill(pid, signal.SIGKILL)
