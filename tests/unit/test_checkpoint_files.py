"""A run's checkpoint files (`RunCheckpoints`) and when a run saves one
(`CheckpointSchedule`), without TensorFlow: `write` stands for `Trainer.save`."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.engine.checkpoints import (
    AUTO_SECONDS,
    BUDGET,
    HISTORY,
    CheckpointSchedule,
    RunCheckpoints,
    spread,
)


def write(prefix: str) -> None:
    """Writes what a TensorFlow checkpoint writes: an index and a data file."""
    Path(f"{prefix}.index").write_bytes(b"i" * 10)
    Path(f"{prefix}.data-00000-of-00001").write_bytes(b"d" * 90)


def test_saved_checkpoints_are_listed_by_step(tmp_path: Path) -> None:
    checkpoints = RunCheckpoints(tmp_path / "run")
    assert checkpoints.list() == [] and checkpoints.last() is None and checkpoints.size() == 0
    for step in (20, 5, 10):
        checkpoints.save(step, seconds=step / 10, write=write)
    assert [c.step for c in checkpoints.list()] == [5, 10, 20]
    last = checkpoints.last()
    assert last is not None and (last.step, last.seconds) == (20, 2.0)
    assert last.prefix == str(tmp_path / "run" / "step-20")
    assert last.bytes > 100  # the two files and the marker
    assert checkpoints.find(10) is not None and checkpoints.find(11) is None
    assert checkpoints.size() == sum(c.bytes for c in checkpoints.list())


def test_a_checkpoint_cut_short_does_not_count(tmp_path: Path) -> None:
    checkpoints = RunCheckpoints(tmp_path)
    checkpoints.save(10, 1.0, write)
    write(str(tmp_path / "step-20"))  # the process died before the marker was written

    def dies(prefix: str) -> None:
        write(prefix)
        raise OSError("disk full")

    with pytest.raises(OSError):
        checkpoints.save(30, 3.0, dies)
    assert [c.step for c in checkpoints.list()] == [10]


def test_a_step_saved_already_is_kept(tmp_path: Path) -> None:
    checkpoints = RunCheckpoints(tmp_path)
    first = checkpoints.save(10, 1.0, write)
    again = checkpoints.save(10, 9.0, lambda prefix: pytest.fail("written twice"))
    assert again == first


def test_prune_keeps_the_last_and_the_protected(tmp_path: Path) -> None:
    checkpoints = RunCheckpoints(tmp_path)
    for step in range(10, 80, 10):
        checkpoints.save(step, 0.0, write)
    checkpoints.prune(keep=3, protected={20}, history=0)
    assert [c.step for c in checkpoints.list()] == [20, 50, 60, 70]
    assert sorted(p.name for p in tmp_path.iterdir() if "step-30" in p.name) == []
    checkpoints.delete()
    assert not tmp_path.exists() and checkpoints.list() == []


def test_an_interval_saves_on_its_multiples() -> None:
    schedule = CheckpointSchedule(every=25)
    assert [s for s in range(1, 101) if schedule.due(s, s * 0.01)] == [25, 50, 75, 100]
    assert not any(CheckpointSchedule(every=0).due(s, 1e9) for s in range(1, 100))


def test_automatic_checkpoints_follow_training_time() -> None:
    schedule = CheckpointSchedule(every=None)
    assert not schedule.due(10, AUTO_SECONDS - 0.1)
    assert schedule.due(10, AUTO_SECONDS)
    schedule.saved(took=0.5, training_seconds=AUTO_SECONDS + 0.5)
    assert not schedule.due(20, 2 * AUTO_SECONDS)
    assert schedule.due(20, 2 * AUTO_SECONDS + 0.5)


def test_automatic_checkpoints_cost_at_most_the_budget() -> None:
    schedule = CheckpointSchedule(every=None)
    took = 5.0  # a save slower than the clock rule allows for
    schedule.saved(took=took, training_seconds=100.0)
    wait = next(t for t in range(100, 10**4) if schedule.due(1, float(t))) - 100
    assert took / (wait + took) <= BUDGET
    assert wait > AUTO_SECONDS  # the cost, not the clock, set the wait


def test_a_resumed_schedule_counts_from_its_checkpoint() -> None:
    schedule = CheckpointSchedule(every=None, seconds=1000.0)
    assert not schedule.due(1, 1000.0 + AUTO_SECONDS / 2)
    assert schedule.due(1, 1000.0 + AUTO_SECONDS)


def test_a_long_run_keeps_a_log_spaced_history_to_fork_from(tmp_path: Path) -> None:
    checkpoints = RunCheckpoints(tmp_path)
    for step in range(200, 10_001, 200):  # as a run saves and prunes
        checkpoints.save(step, 0.0, write)
        checkpoints.prune()
    # The first checkpoint at or after 1, 2, 5, 10, ... steps, and the last KEEP.
    assert [c.step for c in checkpoints.list()] == [200, 600, 1000, 2000, 5000, 9600, 9800, 10000]


def test_the_history_is_bounded_and_keeps_its_latest_decades() -> None:
    assert (
        spread(list(range(1, 10_001)))
        == [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000][-HISTORY:]
    )
    assert spread([3, 7, 9, 30, 31, 400]) == [3, 7, 30, 400]  # irregular steps (saved by time)
    assert spread([5, 10], limit=0) == []
