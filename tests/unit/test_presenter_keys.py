"""The presenter's key: a chosen one must be strong (`presenter.checked_key`), and wrong
guesses at it are limited per client address (`core.guesses`), on a clock of the test's."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from core import presenter
from core.guesses import Guesses, TooManyGuesses
from core.presenter import KEY_VARIABLE

WEAK = ["a" * 16, "abababababababab", "abcdabcdabcdabcd", "passwordpassword", "a" * 43, "k" * 15]
STRONG = ["0123456789abcdef", "correct horse battery staple", "the-presenters-key-0123456789"]


@pytest.mark.parametrize("key", WEAK)
def test_a_weak_chosen_key_is_refused_saying_what_a_key_needs(key: str) -> None:
    with pytest.raises(ValueError) as refused:
        presenter.checked_key(key)
    said = str(refused.value)
    assert said.startswith(
        f"{KEY_VARIABLE}: a key needs at least 16 characters, at least 10 of them different; "
        f"unset {KEY_VARIABLE} for a new random key at each start"
    )
    assert f"(this one has {len(key)}, {len(set(key))} different)" in said
    assert key not in said


@pytest.mark.parametrize("key", STRONG)
def test_a_strong_chosen_key_is_taken(key: str) -> None:
    assert presenter.checked_key(key) == key


def test_the_generated_key_is_256_bits_and_passes() -> None:
    for _ in range(200):
        key = presenter.new_key()
        assert len(key) == 43 and presenter.checked_key(key) == key  # 32 bytes, base64


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def right(answer: bool) -> tuple[list[int], Callable[[], bool]]:
    """A comparison that answers `answer`, and the list of its calls."""
    calls: list[int] = []

    def compare() -> bool:
        calls.append(1)
        return answer

    return calls, compare


def test_five_wrong_guesses_a_minute_then_even_the_right_one_waits() -> None:
    clock = Clock()
    guesses = Guesses("presenter key", limit=5, window=60, clock=clock)
    for _ in range(5):
        assert guesses.check("10.0.0.9", lambda: False) is False
        clock.now += 1
    calls, compare = right(True)
    with pytest.raises(TooManyGuesses) as refused:
        guesses.check("10.0.0.9", compare)
    assert not calls  # refused unchecked
    assert refused.value.wait == pytest.approx(55)  # the first wrong guess was 5 s ago
    assert guesses.check("10.0.0.10", lambda: True)  # another address guesses on
    clock.now += 54.5
    with pytest.raises(TooManyGuesses):
        guesses.check("10.0.0.9", compare)
    clock.now += 0.5  # the first wrong guess is a minute old: one try more
    assert guesses.check("10.0.0.9", compare) is True and calls == [1]


def test_the_limit_is_a_sliding_window() -> None:
    clock = Clock()
    guesses = Guesses("presenter key", limit=5, window=60, clock=clock)
    for _ in range(4):
        guesses.check("10.0.0.9", lambda: False)
    clock.now += 59
    guesses.check("10.0.0.9", lambda: False)  # the fifth, within the minute of the first
    clock.now += 1  # the first four have aged out: four tries more, not five
    for _ in range(4):
        assert guesses.check("10.0.0.9", lambda: False) is False
    with pytest.raises(TooManyGuesses):
        guesses.check("10.0.0.9", lambda: True)


def test_right_guesses_are_not_counted() -> None:
    guesses = Guesses("presenter key", limit=2, window=60, clock=Clock())
    for _ in range(10):
        assert guesses.check("10.0.0.9", lambda: True)
    assert guesses.check("10.0.0.9", lambda: False) is False


def test_it_forgets_the_addresses_whose_guesses_aged_out() -> None:
    clock = Clock()
    guesses = Guesses("presenter key", limit=5, window=60, clock=clock)
    for n in range(1000):
        guesses.check(f"10.0.{n // 256}.{n % 256}", lambda: False)
    clock.now += 60
    guesses.check("10.9.9.9", lambda: True)
    assert not guesses._wrong  # nothing kept of the last minute's thousand addresses


def test_wrong_and_refused_guesses_are_logged_by_address_not_by_guess(caplog) -> None:
    guesses = Guesses("presenter key", limit=1, window=60, clock=Clock())
    guess = "the-guess-0123456789"
    with caplog.at_level(logging.WARNING, logger="core.guesses"):
        guesses.check("10.0.0.9", lambda: guess == "the key")
        with pytest.raises(TooManyGuesses):
            guesses.check("10.0.0.9", lambda: guess == "the key")
    assert [r.getMessage() for r in caplog.records] == [
        "a wrong presenter key from 10.0.0.9 (1 of 1 in 60 s)",
        "presenter key from 10.0.0.9 refused unchecked: 1 wrong in the last 60 s; next try in 60 s",
    ]
