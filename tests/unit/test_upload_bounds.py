"""`ui.upload_guard.BoundedUploads`, with small bounds: what one session and all sessions
hold in uploads, kept and under way; the files of sessions gone; a session's end."""

from __future__ import annotations

import pytest
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from ui import roles
from ui.upload_guard import SESSION_BYTES, TOTAL_BYTES, BoundedUploads, Full

SESSION = "a session holds at most"
TOTAL = "the lab holds at most"


def bounded(ended: list[str] | None = None) -> BoundedUploads:
    """Bounds of 100 bytes a session and 150 in all."""
    return BoundedUploads(
        "/_stcore/upload_file", 100, 150, ended=(ended if ended is not None else []).append
    )


def file(file_id: str, size: int) -> UploadedFileRec:
    return UploadedFileRec(file_id=file_id, name=f"{file_id}.npz", type="", data=b"\0" * size)


def connected(_session: str) -> bool:
    return True


def test_the_bounds_are_a_dataset_file_and_the_next_a_session_and_three_in_all() -> None:
    from core.data.files import MAX_BYTES

    assert (SESSION_BYTES, TOTAL_BYTES) == (2 * MAX_BYTES, 3 * MAX_BYTES)


def test_what_a_session_keeps_is_bounded() -> None:
    uploads = bounded()
    uploads.add_file("s", file("a", 60))
    uploads.add_file("s", file("a", 100))  # a file of the same id replaces the first
    with pytest.raises(Full, match=SESSION):
        uploads.add_file("s", file("b", 1))
    uploads.remove_file("s", "a")
    uploads.add_file("s", file("b", 100))


def test_what_all_sessions_keep_is_bounded() -> None:
    uploads = bounded()
    uploads.add_file("s", file("a", 100))
    uploads.add_file("t", file("a", 50))
    with pytest.raises(Full, match=TOTAL):
        uploads.add_file("u", file("a", 1))
    assert [f.file_id for f in uploads.get_files("u", ["a"])] == []


def test_uploads_under_way_count_until_they_end() -> None:
    uploads = bounded()
    with uploads.arriving("s", 60, connected), uploads.arriving("s", 40, connected):
        with pytest.raises(Full, match=SESSION), uploads.arriving("s", 1, connected):
            pass
        with (
            uploads.arriving("t", 50, connected),
            pytest.raises(Full, match=TOTAL),
            uploads.arriving("t", 1, connected),
        ):
            pass
    with uploads.arriving("s", 100, connected):  # all of them ended, with or without a file
        uploads.add_file("s", file("a", 100))
    with pytest.raises(Full, match=SESSION), uploads.arriving("s", 1, connected):
        pass


def test_an_upload_that_fails_gives_its_room_back() -> None:
    uploads = bounded()
    with pytest.raises(ConnectionError), uploads.arriving("s", 100, connected):
        raise ConnectionError("the client hung up")
    with uploads.arriving("s", 100, connected):
        pass


def test_the_files_of_sessions_gone_are_dropped_when_room_is_needed() -> None:
    uploads = bounded()
    uploads.add_file("gone", file("a", 100))
    uploads.add_file("here", file("a", 40))
    with uploads.arriving("new", 10, lambda s: s != "gone"):  # room enough: nothing dropped
        pass
    assert uploads.get_files("gone", ["a"])
    with uploads.arriving("new", 100, lambda s: s != "gone"):
        uploads.add_file("new", file("a", 100))
    assert not uploads.get_files("gone", ["a"]) and uploads.get_files("here", ["a"])


def test_a_sessions_end_drops_its_files_and_its_admission() -> None:
    ended: list[str] = []
    uploads = bounded(ended)
    uploads.add_file("s", file("a", 100))
    uploads.remove_session_files("s")
    assert ended == ["s"] and not uploads.get_files("s", ["a"])
    uploads.add_file("t", file("a", 100))


def test_by_default_a_sessions_end_ends_its_admission_as_the_presenter() -> None:
    uploads = BoundedUploads("/_stcore/upload_file")
    roles.ADMITTED.add("presenting")
    assert "presenting" in roles.ADMITTED
    uploads.remove_session_files("presenting")
    assert "presenting" not in roles.ADMITTED
