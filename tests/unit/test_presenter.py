"""`core.presenter`: who presents, and the URLs and QR code the room gets."""

from __future__ import annotations

import numpy as np
import pytest
import zxingcpp

from core import presenter
from core.presenter import KEY_VARIABLE, Role, role_of

# The blocks `qr_terminal` draws, two modules each (top, bottom): True where light.
BLOCKS = {"█": (True, True), " ": (False, False), "▀": (True, False), "▄": (False, True)}


def decoded(text: str) -> list[str]:
    """What a phone would read from a QR code drawn in text on a dark terminal."""
    rows = [line for line in text.splitlines() if line]
    light = np.array(
        [[BLOCKS[c][half] for c in row] for row in rows for half in (0, 1)], dtype=bool
    )
    image = np.kron(np.where(light, 255, 0).astype(np.uint8), np.ones((8, 8), np.uint8))
    return [found.text for found in zxingcpp.read_barcodes(np.pad(image, 32, constant_values=255))]


def test_without_a_key_every_session_presents() -> None:
    assert role_of(None, None) is Role.PRESENTER
    assert role_of("anything", None) is Role.PRESENTER


def test_only_the_key_makes_a_presenter() -> None:
    key = presenter.new_key()
    assert role_of(key, key) is Role.PRESENTER
    for given in (None, "", key[:-1], key + "x", key.upper()):
        assert role_of(given, key) is Role.VIEWER, given


def test_keys_are_long_and_fresh() -> None:
    keys = {presenter.new_key() for _ in range(20)}
    assert len(keys) == 20 and min(map(len, keys)) >= 40


def test_a_key_from_the_environment_must_be_strong_enough(monkeypatch) -> None:
    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    assert presenter.key_from_environment() is None
    for weak in ("short", "a" * 16):
        monkeypatch.setenv(KEY_VARIABLE, weak)
        with pytest.raises(ValueError, match=f"{KEY_VARIABLE}: a key needs at least 16 char"):
            presenter.key_from_environment()
    monkeypatch.setenv(KEY_VARIABLE, "0123456789abcdef")
    assert presenter.key_from_environment() == "0123456789abcdef"


def test_only_the_presenter_url_carries_the_key() -> None:
    key = presenter.new_key()
    audience = presenter.audience_url("10.0.0.7", 8501)
    assert audience == "http://10.0.0.7:8501/" and key not in audience
    assert presenter.presenter_url("10.0.0.7", 8501, key) == f"{audience}?key={key}"


def test_the_terminal_qr_code_reads_back_as_the_audience_url() -> None:
    url = presenter.audience_url("192.168.1.23", 8501)
    assert decoded(presenter.qr_terminal(url)) == [url]


def test_the_page_qr_code_is_an_svg_of_the_url() -> None:
    svg = presenter.qr_svg("http://192.168.1.23:8501/")
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")


def test_the_room_address_is_an_ipv4_address() -> None:
    parts = presenter.room_address().split(".")
    assert len(parts) == 4 and all(0 <= int(p) <= 255 for p in parts)
