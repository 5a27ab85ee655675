"""What `make test`'s two passes rely on: the files it hands out first exist (a renamed one
would lose its place at the front without a word, and end the parallel pass alone again),
every test marked `serial` is in a file its second pass collects (one elsewhere would be
run by neither pass), and no two test files share a name."""

import re
from pathlib import Path

from tests.conftest import LONGEST_FILES

ROOT = Path(__file__).resolve().parents[2]
SERIAL_MARK = re.compile(r"pytest\.mark\.serial\b")


def test_every_file_handed_out_first_exists() -> None:
    assert [path for path in LONGEST_FILES if not (ROOT / path).is_file()] == []


def test_every_file_that_marks_a_test_serial_is_collected_by_the_serial_pass() -> None:
    (line,) = re.findall(r"^SERIAL_FILES := (.+)$", (ROOT / "Makefile").read_text(), re.M)
    collected = set(line.split())
    marking = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("test_*.py")
        if SERIAL_MARK.search(path.read_text())
    }
    assert marking and marking <= collected, marking - collected
    assert all((ROOT / path).is_file() for path in collected)


def test_no_two_test_files_share_a_name() -> None:
    """The test folders are not packages: pytest imports each file by its name alone, and
    a second file of the same name in another folder fails the whole run at collection."""
    names: dict[str, list[str]] = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in names.items() if len(paths) > 1} == {}
