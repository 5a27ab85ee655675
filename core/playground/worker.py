"""`Worker`: trajectories computed in a child process, so that the process that asks for
them never imports TensorFlow.

The dashboard's page server must not import Keras: once it is imported, Streamlit runs
`keras.backend.clear_session()` and a garbage collection after every script run, in every
session, on every page. So the Playground page asks a `Worker`, one per page server, which
starts a child (`python -m core.playground.worker`, a fresh interpreter) that imports
TensorFlow once, keeps the compiled loops (`trajectory`'s), and answers one request at a
time over a socket: the arguments of `trajectory` in, `Trajectory.to_json()` out.

The child imports TensorFlow as it starts, before any request: a page that starts its
worker as it opens has the first path about as soon as TensorFlow is loaded. It ends when
the socket closes (its parent exited, however) or when `close` ends it; a child that died is
started again by the next request.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection
from typing import Any

from core.knobs import InvalidInput
from core.playground.trajectory import DEFAULT_STEPS, Trajectory, trajectory
from core.store.paths import PROJECT_ROOT
from core.training import tf_import

#: How long `close` waits for the child to exit once asked (SIGTERM) before it is killed.
GRACE_SECONDS = 5.0


class WorkerError(RuntimeError):
    """The worker could not compute a trajectory: its child died, or failed otherwise."""


class Worker:
    """A child process that computes trajectories; thread-safe (requests queue)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # one request on the socket at a time
        self._process: subprocess.Popen[bytes] | None = None
        self._connection: Connection | None = None
        self.answered = 0  # requests its children have answered: none while TF loads

    def start(self) -> None:
        """Starts the child unless it runs: it imports TensorFlow at once."""
        with self._lock:
            self._started()

    def trajectory(
        self,
        surface: str,
        optimizer: str,
        knobs: Mapping[str, Any] | None = None,
        start: Sequence[float] | None = None,
        steps: int = DEFAULT_STEPS,
    ) -> Trajectory:
        """`core.playground.trajectory` with these arguments, computed in the child.

        Raises:
            InvalidInput: As `trajectory` does, naming every bad field.
            WorkerError: The child died before it answered (it is started again by the
                next request), or `trajectory` failed there otherwise (the reason given).
        """
        request = {
            "surface": surface,
            "optimizer": optimizer,
            "knobs": dict(knobs or {}),
            "start": None if start is None else list(start),
            "steps": steps,
        }
        with self._lock:
            connection = self._started()
            try:
                connection.send(request)
                reply = connection.recv()
                self.answered += 1
            except (EOFError, OSError) as exc:
                self._stop()
                raise WorkerError("the playground's worker process ended; try again") from exc
        if "errors" in reply:
            raise InvalidInput(reply["errors"])
        if "failed" in reply:
            raise WorkerError(reply["failed"])
        return Trajectory.from_json(reply["path"])

    def pid(self) -> int | None:
        """The child's process id, None while none runs."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def close(self) -> None:
        """Ends the child (SIGTERM, then SIGKILL after `GRACE_SECONDS`)."""
        with self._lock:
            self._stop()

    def _started(self) -> Connection:
        if self._process is not None and self._process.poll() is None and self._connection:
            return self._connection
        self._stop()
        # A new interpreter running this module, not multiprocessing's spawn: that runs
        # the parent's `__main__` again in the child, which under Streamlit is the page's
        # script (app.py, run in the child as it imported).
        ours, theirs = socket.socketpair()
        process = subprocess.Popen(
            [sys.executable, "-m", __name__, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            cwd=PROJECT_ROOT,
        )
        theirs.close()  # the child's end: ours reads EOF once the child is gone
        self._process, self._connection = process, Connection(ours.detach())
        return self._connection

    def _stop(self) -> None:
        if self._connection is not None:
            self._connection.close()  # a child still reading ends at the EOF
        if self._process is not None:
            self._process.terminate()  # it keeps nothing; it may be loading TensorFlow
            try:
                self._process.wait(GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = self._connection = None


def serve(connection: Connection) -> None:
    """The child's loop: imports TensorFlow, then answers each request with
    `{"path": Trajectory.to_json()}`, `{"errors": {field: why}}` for bad input, or
    `{"failed": why}`, until the socket closes."""
    tf_import.load()
    while True:
        try:
            request = connection.recv()
        except (EOFError, OSError):
            return
        try:
            with tf_import.start_up_lines_dropped():  # XLA's INFO lines as it compiles
                reply: dict[str, Any] = {"path": trajectory(**request).to_json()}
        except InvalidInput as exc:
            reply = {"errors": exc.errors}
        except Exception as exc:  # said to the page, which shows it; the child goes on
            reply = {"failed": f"{type(exc).__name__}: {exc}"}
        connection.send(reply)


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])))
