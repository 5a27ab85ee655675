"""Uploads on the dashboard's server: the presenter's alone, and bounded.

Streamlit keeps every uploaded file in the server's memory, under the session that sent it,
until the session ends; its route (`PUT /_stcore/upload_file/<session>/<file>`) takes a
file for any live session, and its anti-forgery check compares a header with a cookie
that a client sets both of. A viewer of a room (`optlab present`) that sent the PUTs
itself grew the dashboard by 800 MB with eight 100 MB files, with nothing to stop a ninth.

`install` changes the server that Streamlit's CLI starts next (`ui.serve`):

- its PUT route refuses (403) a session that `ui.roles.may_upload` does not allow, before
  reading a byte of the body: every session but an admitted presenter's, in a room;
- its uploaded-file manager is `BoundedUploads`, which holds at most `SESSION_BYTES` for a
  session and `TOTAL_BYTES` in all, counting the uploads under way at their declared size
  (or Streamlit's per-file limit, where none is declared) as well as those kept; an upload
  beyond a bound is refused (413) before its body is read.

Without a key (`make run`) every session is the presenter, and may upload within the bounds.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from streamlit import config
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec
from streamlit.web.server import server
from streamlit.web.server.starlette import starlette_app, starlette_routes

from core.data import files
from ui import roles

LOG = logging.getLogger(__name__)

#: What one session may hold in uploads, kept and under way: a dataset file at its largest
#: (`core.data.files.MAX_BYTES`, which is Streamlit's own per-file limit too), and the next
#: while the first is still kept (the Train page's uploader holds its file until another
#: replaces it).
SESSION_BYTES = 2 * files.MAX_BYTES
#: What all sessions may hold in uploads at once: three files at their largest (600 MB),
#: room for the presenter's tabs (a room) or one person's (`make run`), who upload a file
#: at a time, and what a laptop spares beside the dashboard's own few hundred MB.
TOTAL_BYTES = 3 * files.MAX_BYTES


class Full(Exception):
    """An upload refused: it would take a session's uploads, or all, past its bound."""


class BoundedUploads(MemoryUploadedFileManager):
    """Streamlit's uploads in memory, with at most `session_bytes` a session and
    `total_bytes` in all, kept or under way; safe to use from any thread.

    Files of a session that is no longer connected count until a bound would refuse an
    upload, and are dropped then: Streamlit drops them as it shuts a session down, but a
    closed tab's session, kept a while for it to reconnect, expires without a shutdown and
    would hold its files as long as the server runs.

    Args:
        endpoint: The upload route's path, as Streamlit's runtime gives its manager
            (this class takes the place of Streamlit's `MemoryUploadedFileManager`).
        session_bytes: The most one session may hold, kept and under way.
        total_bytes: The most all sessions together may hold.
        ended: Told the id of each session whose files Streamlit drops as it shuts the
            session down: by default, the session stops being admitted as a presenter.
    """

    def __init__(
        self,
        endpoint: str,
        session_bytes: int = SESSION_BYTES,
        total_bytes: int = TOTAL_BYTES,
        ended: Callable[[str], None] = roles.ADMITTED.discard,
    ) -> None:
        super().__init__(endpoint)
        self.session_bytes = session_bytes
        self.total_bytes = total_bytes
        self._ended = ended
        self._arriving: dict[str, int] = {}  # a session's uploads under way, in bytes
        self._bounds = threading.Lock()  # over every change to the files and the counts

    @contextmanager
    def arriving(
        self, session_id: str, size: int, connected: Callable[[str], bool]
    ) -> Iterator[None]:
        """Counts `size` bytes under way for `session_id` while its upload is read and
        kept. Raises `Full`, counting nothing, when the session's or all uploads would go
        past their bound even without the files of sessions that `connected` says are gone."""
        with self._bounds:
            if self._over(session_id, size):
                for gone in [s for s in self.file_storage if s != session_id and not connected(s)]:
                    super().remove_session_files(gone)
            if problem := self._over(session_id, size):
                raise Full(problem)
            self._arriving[session_id] = self._arriving.get(session_id, 0) + size
        try:
            yield
        finally:
            with self._bounds:
                left = self._arriving.pop(session_id) - size
                if left:
                    self._arriving[session_id] = left

    def add_file(self, session_id: str, file: UploadedFileRec) -> None:
        """Keeps `file`; raises `Full` when what is kept would go past a bound, whatever
        the route admitted (`arriving` keeps it from getting here)."""
        with self._bounds:
            kept = self._kept()
            kept[session_id] = kept.get(session_id, 0) - self._size(session_id, file.file_id)
            # Not the uploads under way: this file's own is one of them.
            if problem := self._over(session_id, len(file.data), kept, counting_arriving=False):
                raise Full(problem)
            super().add_file(session_id, file)

    def remove_file(self, session_id: str, file_id: str) -> None:
        with self._bounds:
            super().remove_file(session_id, file_id)

    def remove_session_files(self, session_id: str) -> None:
        """Drops the session's files; Streamlit calls it as it shuts the session down, so
        the session is no longer admitted as the presenter either."""
        with self._bounds:
            super().remove_session_files(session_id)
        self._ended(session_id)

    def _over(
        self,
        session_id: str,
        size: int,
        kept: dict[str, int] | None = None,
        *,
        counting_arriving: bool = True,
    ) -> str | None:
        """Why `size` more bytes for `session_id` would go past a bound, or None; beside
        `kept` (else what each session keeps) and the uploads under way, if counted."""
        kept = self._kept() if kept is None else kept
        arriving = self._arriving if counting_arriving else {}
        session = kept.get(session_id, 0) + arriving.get(session_id, 0) + size
        if session > self.session_bytes:
            return f"a session holds at most {_mb(self.session_bytes)} of uploads at once"
        if sum(kept.values()) + sum(arriving.values()) + size > self.total_bytes:
            return f"the lab holds at most {_mb(self.total_bytes)} of uploads at once"
        return None

    def _kept(self) -> dict[str, int]:
        """The bytes each session keeps."""
        return {
            session: sum(len(f.data) for f in kept.values())
            for session, kept in self.file_storage.items()
        }

    def _size(self, session_id: str, file_id: str) -> int:
        """The size of a file kept (0: none), which a file of the same id replaces."""
        kept = self.file_storage.get(session_id, {}).get(file_id)
        return 0 if kept is None else len(kept.data)


def _mb(size: int) -> str:
    return f"{size / 2**20:,.0f} MB"


def declared_size(request: Request) -> int:
    """The most an upload may keep: its declared length, or Streamlit's per-file limit
    where it declares none (or more: Streamlit refuses those unread)."""
    most = int(config.get_option("server.maxUploadSize")) * 2**20
    try:
        return min(max(int(request.headers["content-length"]), 0), most)
    except (KeyError, ValueError):
        return most


Endpoint = Callable[[Request], Awaitable[Response]]


def guard(put: Endpoint, uploads: BoundedUploads, connected: Callable[[str], bool]) -> Endpoint:
    """Streamlit's PUT `put`, for the sessions that may upload, within the bounds: the
    others are refused before any of the body is read, and logged by client address
    (never by session id: the presenter's would let its holder upload)."""

    @functools.wraps(put)
    async def guarded(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        client = request.client.host if request.client else "an unknown address"
        if not roles.may_upload(session_id):
            LOG.warning("an upload from %s refused: its session is not the presenter's", client)
            raise HTTPException(403, "uploads are the presenter's")
        try:
            with uploads.arriving(session_id, declared_size(request), connected):
                return await put(request)
        except Full as exc:
            LOG.warning("an upload from %s refused: %s", client, exc)
            raise HTTPException(413, str(exc)) from None

    return guarded


def guarded_routes(create: Callable[..., list[BaseRoute]]) -> Callable[..., list[BaseRoute]]:
    """Streamlit's `create_upload_routes`, its PUT route `guard`ed."""

    @functools.wraps(create)
    def routes(runtime: Any, upload_mgr: object, base_url: str | None) -> list[BaseRoute]:
        if not isinstance(upload_mgr, BoundedUploads):  # else the bounds would be no one's
            raise TypeError(f"ui.upload_guard: the uploads are a {type(upload_mgr).__name__}")
        return [
            Route(
                route.path,
                guard(route.endpoint, upload_mgr, runtime.is_active_session),
                methods=["PUT"],
            )
            if isinstance(route, Route) and route.methods == {"PUT"}
            else route
            for route in create(runtime, upload_mgr, base_url)
        ]

    return routes


def install() -> None:
    """Bounds the uploads, and guards the upload route, of the server that Streamlit
    starts next in this process; before it starts (its runtime makes the manager, its
    app the routes)."""
    server.MemoryUploadedFileManager = BoundedUploads  # type: ignore[misc]
    starlette_app.create_upload_routes = guarded_routes(starlette_routes.create_upload_routes)
