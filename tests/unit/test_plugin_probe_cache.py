"""A plugin file that imported cleanly in a child is not tried again until it changes
(`core.optimizers.probe`): each try imports TensorFlow in a child, about 3 s. The tries
here have a fixed deadline, without Keras's import to set it (see test_plugin_deadline)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.optimizers import probe


@pytest.fixture
def children(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The files each probing child was given, in a cache of this test's own."""
    monkeypatch.setenv(probe.CACHE_VAR, str(tmp_path / "cache"))
    given: list[list[str]] = []
    in_one_child = probe._probe_in_one_child

    def counted(paths: list[Path], deadline: probe.Deadline) -> dict[Path, str | None]:
        given.append([path.name for path in paths])
        return in_one_child(paths, deadline)

    monkeypatch.setattr(probe, "_probe_in_one_child", counted)
    return given


FIXED = probe.Deadline(floor=20.0)


def plugin(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def test_a_clean_file_is_tried_once_until_it_changes(tmp_path, children) -> None:
    fine = plugin(tmp_path / "plugins", "fine.py", "X = 1\n")
    other = plugin(tmp_path / "plugins", "other.py", "Y = 2\n")
    assert probe.probe([fine], FIXED) == {fine: None}
    assert probe.probe([fine], FIXED) == {fine: None}
    assert children == [["fine.py"]]  # not tried again
    # A new file is tried after those before it, as the lab will import them.
    assert probe.probe([fine, other], FIXED) == {fine: None, other: None}
    assert probe.probe([fine, other], FIXED) == {fine: None, other: None}
    assert children == [["fine.py"], ["fine.py", "other.py"]]

    fine.write_text("while True:\n    pass\n")
    hangs = "did not finish importing within 2 s (tried in a child process)"
    short = probe.Deadline(floor=2.0)
    assert probe.probe([fine], short) == {fine: hangs}
    assert probe.probe([fine], short) == {fine: hangs}  # a failure is not remembered
    assert children[2:] == [["fine.py"], ["fine.py"]]


def test_the_same_bytes_elsewhere_are_tried_again(tmp_path, children) -> None:
    first = plugin(tmp_path / "a", "fine.py", "X = 1\n")
    second = plugin(tmp_path / "b", "fine.py", "X = 1\n")
    probe.probe([first], FIXED)
    probe.probe([second], FIXED)
    assert len(children) == 2


def test_a_cache_others_can_write_is_not_believed(tmp_path, children) -> None:
    fine = plugin(tmp_path / "plugins", "fine.py", "X = 1\n")
    probe.probe([fine], FIXED)
    probe.cache_file().chmod(0o666)  # anyone could have marked a file clean
    probe.probe([fine], FIXED)
    assert len(children) == 2


def test_a_cache_that_cannot_be_written_only_costs_time(tmp_path, monkeypatch) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv(probe.CACHE_VAR, str(blocker))
    fine = plugin(tmp_path / "plugins", "fine.py", "X = 1\n")
    assert probe.probe([fine], FIXED) == {fine: None}
    assert probe.probe([fine], FIXED) == {fine: None}
