"""The per-layer statistics' budget: the interval follows the timings it is given."""

from __future__ import annotations

import pytest

from core.engine import RunConfig
from core.knobs import InvalidInput
from core.training.config import FIELDS
from core.training.per_layer_schedule import (
    BUDGET,
    FIRST_INTERVAL,
    LONGEST,
    WARMUP,
    WINDOW,
    PerLayerSchedule,
    per_layer_schedule,
)

#: The budget the timings below are written for (the default is `BUDGET`).
SHARE = 0.05


def budgeted(log_every: int = 1) -> PerLayerSchedule:
    return PerLayerSchedule(None, log_every=log_every, budget=SHARE)


def timed(schedule: PerLayerSchedule, with_them: float, without: float, rounds: int) -> bool:
    """Feeds `rounds` timings of each kind (after the warm-up's); whether the interval
    changed at any of them."""
    changed = False
    for _ in range(WARMUP + rounds):
        schedule.timed(without, per_layer=False)
        changed |= schedule.timed(with_them, per_layer=True)
    return changed


@pytest.mark.parametrize(
    ("with_them", "without", "every"),
    [
        (2.0e-3, 1.0e-3, 20),  # the statistics double a step: 1 / 0.05 steps apart
        (1.1e-3, 1.0e-3, 2),  # 10% more: every other step keeps 5%
        (1.0e-3, 1.0e-3, 1),  # free: every step
        (1.0, 1.0e-3, LONGEST),  # ruinous: as far apart as a chart allows
    ],
)
def test_the_interval_keeps_the_extra_time_within_the_budget(with_them, without, every) -> None:
    schedule = budgeted()
    assert schedule.every == FIRST_INTERVAL and schedule.budget_share == SHARE
    assert timed(schedule, with_them, without, rounds=5) == (every != FIRST_INTERVAL)
    assert schedule.every == every
    extra_share = (with_them - without) / schedule.every / without
    assert extra_share <= SHARE + 1e-9 or schedule.every == LONGEST


def test_a_budgeted_run_spaces_them_from_its_start() -> None:
    """A step without them costs no trace of its own (`LayerStatistics.when`), so even a
    short run spaces them: its first logged step, then every `FIRST_INTERVAL`-th while
    the first timings come in, and its last."""
    schedule = budgeted()
    assert [step for step in range(1, 14) if schedule.due(step, last=step == 13)] == [
        1,
        *range(FIRST_INTERVAL, 13, FIRST_INTERVAL),
        13,
    ]
    assert FIRST_INTERVAL > 1


def test_warm_up_timings_are_left_out() -> None:
    schedule = budgeted()
    # Traces: a hundred times slower, once each; they must not set the interval.
    schedule.timed(0.1, per_layer=False)
    schedule.timed(1.0, per_layer=True)
    timed(schedule, 1.0e-3, 1.0e-3, rounds=3)
    assert schedule.every == 1


def test_small_changes_leave_the_interval_alone() -> None:
    schedule = budgeted()
    timed(schedule, 2.0e-3, 1.0e-3, rounds=5)
    assert schedule.every == 20
    # 14 would do now: within the hysteresis, so it stays at 20 ...
    assert not timed(schedule, 1.7e-3, 1.0e-3, rounds=20)
    assert schedule.every == 20
    # ... until the cost falls far enough; and it grows as soon as the budget needs it to.
    assert timed(schedule, 1.5e-3, 1.0e-3, rounds=20)
    assert 10 <= schedule.every < 20 / 1.5
    assert timed(schedule, 2.0e-3, 1.0e-3, rounds=20)
    assert schedule.every == 20


def test_a_burst_of_slow_steps_does_not_bring_them_back_to_every_step() -> None:
    schedule = budgeted()
    timed(schedule, 2.0e-3, 1.0e-3, rounds=WINDOW)
    assert schedule.every == 20
    # Another process takes the cores for a while: the steps without them, a window's
    # worth, run three times slower, and the step with them that ends the burst too. Its
    # pair still shows the statistics' cost; the steps before it are not compared.
    for _ in range(WINDOW):
        schedule.timed(3.0e-3, per_layer=False)
    assert not schedule.timed(4.0e-3, per_layer=True)
    assert schedule.every == 20
    # Slower throughout, the statistics cost as much more: the same share, the same interval.
    assert not timed(schedule, 6.0e-3, 3.0e-3, rounds=WINDOW)
    assert schedule.every == 20


def test_the_interval_is_in_logged_steps() -> None:
    schedule = budgeted(log_every=3)
    timed(schedule, 1.2e-3, 1.0e-3, rounds=5)  # 4 steps wanted: the next logged one is 6
    assert schedule.every == 6
    assert [s for s in range(3, 20, 3) if schedule.due(s)] == [3, 6, 12, 18]  # the first too
    assert schedule.due(19, last=True)


def test_a_set_interval_is_kept_whatever_the_timings() -> None:
    schedule = PerLayerSchedule(7, log_every=1)
    assert not timed(schedule, 1.0, 1.0e-3, rounds=5)
    assert schedule.every == 7 and schedule.budget_share is None


def test_a_runs_fields_choose_the_schedule() -> None:
    assert per_layer_schedule(RunConfig()).budget_share == BUDGET == 0.02  # checkpoints' share
    (field,) = [knob for knob in FIELDS if knob.name == "per_layer_every"]  # as forms say it
    assert "within 2% of the training time" in field.help
    assert per_layer_schedule(RunConfig(per_layer_every=10)).every == 10
    explicit_log = per_layer_schedule(RunConfig(log_every=5))  # an explicit log_every wins
    assert explicit_log.every == 5 and not explicit_log.budgeted


def test_per_layer_every_must_fall_on_logged_steps() -> None:
    with pytest.raises(InvalidInput) as caught:
        RunConfig.from_dict({"log_every": 4, "per_layer_every": 6})
    assert set(caught.value.errors) == {"per_layer_every"}
    assert "multiple of log_every" in caught.value.errors["per_layer_every"]
