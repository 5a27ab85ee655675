"""Starting the real app (`streamlit run app.py`) for tests that need a server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from core.processes import end

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
) -> tuple[subprocess.Popen, int]:
    """`streamlit run app.py` as `make run` starts it (`python -m ui.serve run app.py`) on
    a free port with `store` as `OPTLAB_STORE`, once its health check answers; fails the
    test if it does not within 90 s.

    `address=None` leaves the listening address to the config; `command` replaces
    `-m ui.serve` (e.g. `-c CODE` that patches something and then runs Streamlit's CLI).
    """
    port = free_port()
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
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{port}/_stcore/health", timeout=2
            ) as response:
                if response.read() == b"ok":
                    return process, port
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"streamlit did not start; see {log}")
        time.sleep(0.3)


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
    it and launches none); fails the test if it does not within 60 s."""
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
    deadline = time.monotonic() + 60
    while serving_engine(store) is None:
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the engine did not start; see {log}")
        time.sleep(0.2)
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
    """Stops the engine serving `store`, if one does: SIGTERM, then SIGKILL after 15 s."""
    pid = serving_engine(store)
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while serving_engine(store) == pid:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            return
        time.sleep(0.1)
