"""Uploads and keys in a room, against the real `optlab present` and Debian's Chromium:
a viewer's raw PUTs to Streamlit's upload route are refused unread and leave the
dashboard's memory flat; the presenter uploads a dataset through the Train page; what one
session, and all, hold in uploads is bounded; and the sixth wrong key of a minute from an
address is refused unchecked, the right one included."""

from __future__ import annotations

import http.client
import socket
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

from core.guesses import LIMIT
from core.store import Store
from tests.browser import NEEDS_CHROMIUM, chromium, settle
from tests.room import Room, served, session_ids
from tests.viewer_actions import CONTROLS
from tests.waiting import scaled, wait_for

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]

MB = 2**20
# Streamlit's anti-forgery pair, both set by the client: any two equal hex strings pass.
FORGED = {"X-Xsrftoken": "abcd", "Cookie": "_streamlit_xsrf=abcd"}
BOUNDARY = "optlab-test"


@pytest.fixture(scope="module")
def room(tmp_path_factory) -> Iterator[Room]:
    folder = tmp_path_factory.mktemp("room")
    store = folder / "lab.sqlite"
    Store(store).close()
    with served(folder, store) as room:
        yield room


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as browser:
        yield browser


def opened(browser: Any, url: str) -> tuple[Any, str]:
    """A new page on `url`, once its script has run, and its session's id."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    ids = session_ids(page)
    page.goto(url)
    settle(page)
    wait_for(lambda: ids, 30, "the page's session id")
    return page, ids[-1]


def presenting(browser: Any, room: Room) -> str:
    """A session on the presenter URL, once it shows the presenter's controls: its id."""
    page, session = opened(browser, room.presenter)
    page.get_by_role("button", name="Start the demo race").wait_for(timeout=scaled(60_000))
    return session


def port(room: Room) -> int:
    return urllib.parse.urlsplit(room.audience).port


def multipart(size: int) -> tuple[bytes, bytes]:
    """The head and tail of a form that holds one file of `size` bytes between them."""
    head = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="x.npz"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    return head, f"\r\n--{BOUNDARY}--\r\n".encode()


def headers(length: int) -> dict[str, str]:
    return {
        "Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
        "Content-Length": str(length),
        **FORGED,
    }


def put(room: Room, session: str, size: int, file_id: str = "probe") -> tuple[int, str]:
    """A raw PUT of a `size`-byte file to `session`'s upload address, as the attacker sent
    it (the whole body, the anti-forgery pair set by hand): (status, body)."""
    head, tail = multipart(size)
    body = head + b"\0" * size + tail
    connection = http.client.HTTPConnection("127.0.0.1", port(room), timeout=scaled(60))
    try:
        path = f"/_stcore/upload_file/{session}/{file_id}"
        connection.request("PUT", path, body=body, headers=headers(len(body)))
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


@contextmanager
def under_way(room: Room, session: str, size: int, file_id: str) -> Iterator[None]:
    """An upload to `session` that declares a body of `size` bytes (Streamlit's limit
    counts the form's framing too), held under way: it asks for `100 Continue`, which the
    server sends once its route reads the body, past the guard, and sends no body; it
    hangs up as the block ends."""
    with socket.create_connection(("127.0.0.1", port(room)), timeout=scaled(60)) as connection:
        lines = [
            f"PUT /_stcore/upload_file/{session}/{file_id} HTTP/1.1",
            f"Host: 127.0.0.1:{port(room)}",
            "Expect: 100-continue",
            *(f"{name}: {value}" for name, value in headers(size).items()),
        ]
        connection.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += connection.recv(4096) or pytest.fail(f"hung up: {answer!r}")
        assert answer.startswith(b"HTTP/1.1 100"), answer
        yield


def test_a_viewers_raw_uploads_are_refused_unread_and_memory_stays_flat(room, browser) -> None:
    _, viewer = opened(browser, room.audience)
    dashboard = room.dashboard()
    before = dashboard.memory_info().rss
    answers = [put(room, viewer, 20 * MB, f"file{n}") for n in range(8)]
    grown = (dashboard.memory_info().rss - before) / MB
    print(f"\nviewer: 8 PUTs of 20 MB: {answers[0]}; the dashboard grew {grown:.1f} MB")
    assert all(status == 403 for status, _ in answers), answers
    assert "uploads are the presenter's" in answers[0][1]
    assert grown < 20  # less than one upload: none was kept (Streamlit kept all: +160 MB)
    assert "an upload from 127.0.0.1 refused" in room.output.read_text()


def test_the_presenter_uploads_a_dataset_on_train(room, browser, tmp_path) -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(40, 28, 28), dtype=np.uint8)
    labels = (images.mean(axis=(1, 2)) > 127.5).astype("int64")
    upload = tmp_path / "mine.npz"
    np.savez(
        upload, x_train=images[:30], y_train=labels[:30], x_test=images[30:], y_test=labels[30:]
    )
    page, _ = opened(browser, room.presenter)
    page.locator("[data-testid=stSidebar] a", has_text="Train").click()
    settle(page)
    page.get_by_role("button", name="Your own data").click()
    page.locator("input[type='file']").set_input_files(str(upload))
    page.wait_for_function(  # kept and picked: the select box shows it
        "() => [...document.querySelectorAll('input')]"
        ".some(i => i.value.startsWith('your file mine.npz'))",
        timeout=scaled(60_000),
    )
    kept = room.store.parent / f"{room.store.stem}.datasets"
    assert [p.name for p in kept.iterdir() if p.name.startswith("mine.")]


def test_a_session_and_all_hold_at_most_their_bounds_of_uploads(room, browser) -> None:
    """Two uploads of 200 MB under way take a presenter's session to its 400 MB: 1 MB
    more is refused, unread. Another session's 150 MB under way, and its 60 MB more would
    take the lab past its 600 MB (whatever the earlier tests' sessions keep, a few kB):
    refused too. Once they hang up, it is taken."""
    first, second = presenting(browser, room), presenting(browser, room)
    with under_way(room, first, 200 * MB, "a"), under_way(room, first, 200 * MB, "b"):
        assert put(room, first, MB) == (413, "a session holds at most 400 MB of uploads at once")
        with under_way(room, second, 150 * MB, "c"):
            refused = put(room, second, 60 * MB)
            assert refused == (413, "the lab holds at most 600 MB of uploads at once")
    wait_for(lambda: put(room, second, MB)[0] == 204, 30, "an upload once the others hung up")


def test_the_sixth_wrong_key_of_a_minute_is_refused_unchecked(room, browser) -> None:
    """Last in this file: the room then refuses this machine's keys for a minute."""
    for _ in range(LIMIT):
        page, _ = opened(browser, f"{room.audience}?key=not-the-key")
        assert "not the presenter's key" in page.inner_text("body")
    page, _ = opened(browser, room.presenter)  # the right key, refused as the 6th
    assert "Too many wrong keys from this address: try again in" in page.inner_text("body")
    texts = page.locator("button").all_inner_texts()
    assert not {line.strip() for text in texts for line in text.splitlines()} & CONTROLS
    log = room.output.read_text()
    assert "presenter key from this machine refused unchecked" in log
    assert "not-the-key" not in log and log.count(room.key) == 1  # the banner's URL alone
