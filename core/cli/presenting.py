"""`present`: the dashboard served to a room, the presenter in control; its parser beside
its handler.

The dashboard is a Streamlit server, which core never imports: `present` starts it as a
child process (`python -m ui.serve run app.py`, as `make run` does) with the presenter's
key in its environment, where `ps` does not show it, and prints the URLs once it answers.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from types import FrameType

from core import guesses, presenter, processes
from core.cli.exits import EXIT_FAILED, UsageError
from core.cli.flags import Common, Subparsers
from core.store import Store, StoreError, default_location
from core.store.paths import ENV_VAR, PROJECT_ROOT

DEFAULT_ADDRESS = "0.0.0.0"  # every interface: the room reaches the presenter's machine
DEFAULT_PORT = 8501
START_SECONDS = 90.0  # how long the dashboard may take to answer its health check
STOP_SECONDS = 15.0  # how long it may take to exit once told to, before it is killed


def add_present(commands: Subparsers, common: Common) -> None:
    """`present`."""
    command = commands.add_parser(
        "present",
        parents=[common.store],
        help="Serve the dashboard to a room: you steer, everyone else watches.",
        description="Serve the dashboard on the network for a live demo. It prints the "
        "audience URL (and its QR code), which anyone may open to watch, and the presenter "
        f"URL, which carries a secret key (new at each start, or ${presenter.KEY_VARIABLE}: "
        f"at least {presenter.SHORTEST_KEY} characters, {presenter.FEWEST_DISTINCT} of them "
        f"different) and alone lets a browser start, steer or delete runs; {guesses.LIMIT} wrong "
        "keys a minute from an address, then it waits. Ctrl-C or SIGTERM stops it.",
    )
    command.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        metavar="N",
        help=f"The port to serve on. Default: {DEFAULT_PORT}.",
    )
    command.add_argument(
        "--address",
        default=DEFAULT_ADDRESS,
        metavar="ADDR",
        help="The IP address to listen on. Default: every interface (0.0.0.0); "
        "127.0.0.1 keeps it to this machine (behind an SSH tunnel, say).",
    )
    command.set_defaults(command="present", handler=present)


def checked_address(address: str) -> str:
    """`address` if it is an IP address; else a `UsageError` naming the field."""
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        raise UsageError(
            f"address: must be an IP address, e.g. 0.0.0.0 (every interface) or 127.0.0.1 "
            f"(got {address!r})"
        ) from None


def checked_port(address: str, port: int) -> int:
    """`port` if it is one and free on `address`; else a `UsageError` naming the field."""
    if not 1 <= port <= 65535:
        raise UsageError(f"port: must be in [1, 65535] (got {port})")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            probe.bind((address, port))
        except OSError as exc:
            raise UsageError(
                f"port: {port} cannot be served on {address}: {exc.strerror}"
            ) from None
    return port


def banner(address: str, port: int, key: str) -> str:
    """What the terminal shows once the dashboard answers: the audience URL, the presenter
    URL (the only place the key is ever printed) and the audience URL's QR code."""
    host = presenter.room_host(address)
    audience = presenter.audience_url(host, port)
    return (
        f"Optimizer Lab is live for the room.\n\n"
        f"  Audience URL (share it, or the QR code below): {audience}\n"
        f"  Presenter URL (yours alone: it steers the runs): "
        f"{presenter.presenter_url(host, port, key)}\n\n"
        f"{presenter.qr_terminal(audience)}\n"
        "Ctrl-C stops the dashboard (runs that train go on in the engine).\n"
    )


def present(args: argparse.Namespace) -> int:
    """Serves the dashboard to the room until Ctrl-C or SIGTERM; its exit status when it
    ends by itself."""
    address = checked_address(args.address)
    port = checked_port(address, args.port)
    try:
        key = presenter.key_from_environment() or presenter.new_key()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    location = args.store or default_location()
    try:
        Store(location).close()  # a corrupt or foreign store is refused before anything starts
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    dashboard = subprocess.Popen(
        [sys.executable, "-m", "ui.serve", "run", "app.py", *_flags(address, port)],
        cwd=PROJECT_ROOT,
        stdin=subprocess.DEVNULL,
        env={**os.environ, ENV_VAR: str(location), presenter.KEY_VARIABLE: key},
    )
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        if not _answers(dashboard, address, port):
            print("error: the dashboard did not start (see above)", file=sys.stderr)
            return EXIT_FAILED
        print(banner(address, port, key), flush=True)
        return dashboard.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
        processes.end(dashboard, STOP_SECONDS)


def _flags(address: str, port: int) -> list[str]:
    """Streamlit's flags: where to listen, and no browser to open on this machine."""
    return ["--server.address", address, "--server.port", str(port), "--server.headless", "true"]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM as Ctrl-C: the dashboard is stopped on the way out."""
    raise KeyboardInterrupt


def _answers(dashboard: subprocess.Popen[bytes], address: str, port: int) -> bool:
    """Waits until the dashboard's health check answers on `address` (the loopback
    address when it listens on every interface); False if it exits or is late first."""
    host = "127.0.0.1" if address == "0.0.0.0" else "[::1]" if address == "::" else address
    host = f"[{host}]" if ":" in host and not host.startswith("[") else host
    local = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy: here
    deadline = time.monotonic() + START_SECONDS
    while dashboard.poll() is None and time.monotonic() < deadline:
        try:
            with local.open(f"http://{host}:{port}/_stcore/health", timeout=2) as r:
                if r.read() == b"ok":
                    return True
        except OSError:
            time.sleep(0.3)
    return False
