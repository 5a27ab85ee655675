"""`optlab present`'s checks and banner, without serving: bad flags name their field; the
banner holds both URLs and a QR code of the audience URL."""

from __future__ import annotations

import os
import socket

import pytest

from core.cli.presenting import banner
from core.presenter import KEY_VARIABLE
from tests.cli import run_main
from tests.unit.test_presenter import decoded


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (["--port", "0"], "port: must be in [1, 65535]"),
        (["--port", "70000"], "port: must be in [1, 65535]"),
        (["--port", "many"], "--port: invalid int value"),
        (["--address", "the-room"], "address: must be an IP address"),
    ],
)
def test_bad_flags_name_their_field(flags: list[str], field: str) -> None:
    code, out, err = run_main("present", "--address", "127.0.0.1", *flags)
    assert code == 2 and field in err and not out


def test_a_port_in_use_is_refused_by_name() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = run_main("present", "--address", "127.0.0.1", "--port", port)
    assert code == 2 and f"port: {port} cannot be served on 127.0.0.1" in err


@pytest.mark.parametrize("weak", ["short", "a" * 16, "abcdabcdabcdabcd", "passwordpassword"])
def test_a_weak_key_in_the_environment_is_refused_by_name(monkeypatch, tmp_path, weak) -> None:
    """Before anything starts: no store is made, and the error says what a key needs
    without quoting the key."""
    monkeypatch.setenv(KEY_VARIABLE, weak)
    store = tmp_path / "s.db"
    code, out, err = run_main("present", "--address", "127.0.0.1", "--store", store)
    assert code == 2 and not out and not store.exists()
    assert (
        f"{KEY_VARIABLE}: a key needs at least 16 characters, at least 10 of them different" in err
    )
    assert weak not in err


def test_the_banner_holds_both_urls_and_the_audience_qr_code() -> None:
    key = "k" * 43
    text = banner("127.0.0.1", 8642, key)
    assert "Audience URL (share it, or the QR code below): http://127.0.0.1:8642/\n" in text
    assert f"http://127.0.0.1:8642/?key={key}" in text and text.count(key) == 1
    qr = "\n".join(line for line in text.splitlines() if line and set(line) <= set("█▀▄ "))
    assert decoded(qr) == ["http://127.0.0.1:8642/"]


def test_the_engine_the_dashboard_launches_has_no_key(monkeypatch, tmp_path) -> None:
    from core.engine import server

    started = {}
    monkeypatch.setenv(KEY_VARIABLE, "k" * 43)
    monkeypatch.setattr(server.subprocess, "Popen", lambda *a, **kw: started.update(kw))
    server.launch(str(tmp_path / "lab.sqlite"), max_concurrent=1)
    assert KEY_VARIABLE not in started["env"] and started["env"]["PATH"] == os.environ["PATH"]
