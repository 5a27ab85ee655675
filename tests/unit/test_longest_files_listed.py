"""The files that `make test` hands out first exist: a renamed one would lose its place
at the front without a word, and end the parallel pass alone again."""

from pathlib import Path

from tests.conftest import LONGEST_FILES

ROOT = Path(__file__).resolve().parents[2]


def test_every_file_handed_out_first_exists() -> None:
    assert [path for path in LONGEST_FILES if not (ROOT / path).is_file()] == []
