"""The bench's machinery: interleaved timing, the report, the store clock, the synthetic
telemetry, and a smoke run of one cheap figure. The benchmark itself is not run here."""

from __future__ import annotations

import re
import statistics
import threading
import time
from fractions import Fraction
from types import SimpleNamespace

import pytest

from bench import models as bench_models
from bench import per_layer_ways, report, synthetic, timing, training
from bench.__main__ import main
from bench.figures import FIGURES, select
from bench.profiling import OpProfile
from bench.rows import Measured, Quantity, Row, Target, format_value
from bench.sampler import ANCHOR_ITSELF, OUTSIDE, StackSampler
from bench.step_clock import ClockedStore
from bench.timing import interleave, median_seconds, seconds_per_call
from core import models
from core.engine import Engine, RunConfig
from tests.lean import NO_INSTRUMENTS, digits_trial
from tests.waiting import scaled


def test_interleave_alternates_and_measures_relative_cost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A clock that only the calls move: real sleeps overshoot on a loaded machine.
    now = [0.0]
    monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    order: list[str] = []

    def sleeper(name: str, seconds: float):
        def call() -> None:
            order.append(name)
            now[0] += seconds

        return seconds_per_call(call, calls=3)

    paired = interleave(sleeper("a", 0.004), sleeper("b", 0.008), pairs=5, warmup=1, most=5)

    assert order == ["a", "a", "a", "b", "b", "b"] * 6
    assert len(paired.a) == len(paired.b) == 5
    assert 1 / paired.ratio == pytest.approx(2.0)
    assert paired.a_median == pytest.approx(0.004)


def test_interleave_drops_the_warmup_and_takes_medians() -> None:
    counts = {"a": 0, "b": 0}

    def counter(name: str, scale: float):
        def sample() -> float:
            counts[name] += 1
            return counts[name] * scale

        return sample

    paired = interleave(counter("a", 1.0), counter("b", 4.0), pairs=3, warmup=2)

    assert paired.a == (3.0, 4.0, 5.0) and paired.b == (12.0, 16.0, 20.0)
    assert paired.a_median == 4.0 and paired.b_median == 16.0
    assert paired.ratio == 0.25


def test_interleave_settles_before_every_sample() -> None:
    order: list[str] = []

    def sampler(name: str):
        return lambda: order.append(name) or 1.0

    interleave(sampler("a"), sampler("b"), pairs=2, warmup=1, settle=lambda: order.append("-"))

    assert order == ["-", "a", "-", "b"] * 3


def test_a_wide_spread_takes_more_pairs_up_to_three_times_as_many() -> None:
    noisy = iter([1.0, 2.0, 0.5] * 100)
    paired = interleave(lambda: next(noisy), lambda: 1.0, pairs=4, warmup=0)
    assert len(paired.a) == 12 and paired.wide
    steady = interleave(lambda: 1.0, lambda: 2.0, pairs=4, warmup=0)
    assert len(steady.a) == 4 and steady.spread == (0.5, 0.5)
    exact = interleave(lambda: next(noisy), lambda: 1.0, pairs=4, warmup=0, most=4)
    assert len(exact.a) == 4


def test_pairs_past_the_least_are_taken_only_until_they_judge_the_target() -> None:
    """A figure's ratio target is judged once its ratios' whole spread lies on one side of
    the bound; until then it takes more pairs, up to `most`."""
    target = Target(">=", 0.90)
    clear = iter([0.95, 0.97, 0.96, 0.95, 0.98] * 10)
    met = interleave(
        lambda: next(clear), lambda: 1.0, pairs=3, warmup=0, most=9, judged=target.judged_by
    )
    assert len(met.a) == 3 and target.judged_by(met)  # the least, though it is wide enough
    missed = interleave(
        lambda: 0.5, lambda: 1.0, pairs=3, warmup=0, most=9, judged=target.judged_by
    )
    assert len(missed.a) == 3 and target.judged_by(missed)  # a clear miss is judged too
    # Ratios around the bound: 0.8, 1.2, … straddle 0.90 whatever the count: up to most.
    straddling = iter([0.8, 1.2] * 10)
    unclear = interleave(
        lambda: next(straddling), lambda: 1.0, pairs=3, warmup=0, most=9, judged=target.judged_by
    )
    assert len(unclear.a) == 9 and not target.judged_by(unclear)
    # A run of ratios that settles above the bound stops as soon as its spread does.
    settling = iter([0.85, 0.95, 0.95, 0.96, 0.95, 0.97, 0.95, 0.96, 0.95])
    settled = interleave(
        lambda: next(settling), lambda: 1.0, pairs=3, warmup=0, most=9, judged=target.judged_by
    )
    assert 3 < len(settled.a) < 9 and target.judged_by(settled)
    assert not Target("<=", 2.0, on="a", unit="s").judged_by(settled)  # not by pairs


def test_a_figure_is_measured_against_its_own_target(monkeypatch) -> None:
    """`python -m bench` hands each figure its row's target, which its pairs judge."""
    seen = []

    def figure(settings) -> Measured:
        seen.append(settings.target)
        ratios = iter([0.5, 0.6, 0.4] * 10)
        paired = settings.interleave(lambda: next(ratios), lambda: 1.0)
        return Measured.compared(paired, "s")

    monkeypatch.setattr(type(FIGURES[0]), "load", lambda self: figure)
    assert main(["--only", "1", "--pairs", "3"]) == 0
    assert seen == [FIGURES[0].target]


def test_a_ratio_target_is_met_only_when_its_whole_spread_meets_it() -> None:
    def row(ratio: float, spread: tuple[float, float]) -> Row:
        measured = Measured(Quantity(1.0, "s"), Quantity(1.0, "s"), ratio, spread)
        return Row("3", "x", Target("<=", 1.05), measured)

    assert row(1.0, (0.97, 1.04)).met
    assert not row(1.0, (0.95, 1.08)).met
    assert "1.00× (0.95–1.08)" in report.table([row(1.0, (0.95, 1.08))])


def test_bad_counts_are_refused() -> None:
    with pytest.raises(ValueError):
        interleave(lambda: 1.0, lambda: 1.0, pairs=0)
    with pytest.raises(ValueError):
        interleave(lambda: 1.0, lambda: 1.0, pairs=1, warmup=-1)
    with pytest.raises(ValueError):
        seconds_per_call(lambda: None, calls=0)
    with pytest.raises(ValueError):
        median_seconds(lambda: None, runs=0)


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (0.0041, "s", "4.10 ms"),
        (0.25, "s", "250 ms"),
        (12.5, "s", "12.5 s"),
        (3.2e-5, "s", "32.0 µs"),
        (2_500_000, "B", "2.50 MB"),
        (152.34, "steps/s", "152 steps/s"),
        (9.876, "steps/s", "9.88 steps/s"),
        (116_224.4, "rows/s", "116,224 rows/s"),
    ],
)
def test_values_are_formatted_with_three_digits(value, unit, text) -> None:
    assert format_value(value, unit) == text


def test_targets_judge_ratios_and_values() -> None:
    faster = Target(">=", 1.0)
    assert str(faster) == "≥ 1.00×"
    assert faster.accepts(1.0) and not faster.accepts(0.99) and not faster.accepts(float("nan"))
    quick = Target("<=", 0.25, on="a", unit="s")
    assert str(quick) == "≤ 250 ms"
    assert quick.accepts(0.2) and not quick.accepts(0.3)


def _rows() -> list[Row]:
    steps = Quantity(150.0, "steps/s")
    return [
        Row("1", "fast", Target(">=", 1.0), Measured(steps, Quantity(140.0, "steps/s"), 1.07)),
        Row("2", "slow", Target("<=", 1.1), Measured(Quantity(0.006, "s"), None, 1.3), "why"),
        Row("3 ref", "reference", None, Measured(steps, steps, 1.0)),
        Row("5", "charts", Target("<=", 0.25, on="a", unit="s"), None, "Not measured: x."),
        Row("6b", "read", Target("<=", 0.1, on="a", unit="s"), Measured(Quantity(0.02, "s"))),
    ]


def test_met_is_computed_from_the_target() -> None:
    assert [row.met for row in _rows()] == [True, False, None, False, True]


def test_the_table_has_a_line_per_row_and_the_verdicts() -> None:
    lines = report.table(_rows()).splitlines()

    assert len(lines) == 2 + 5
    assert len({len(line) for line in lines}) == 1  # columns line up
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    assert cells[0] == list(report.COLUMNS)
    assert [row[-1] for row in cells[2:]] == ["yes", "no", "—", "no", "yes"]
    assert cells[2][2:6] == ["150 steps/s", "140 steps/s", "1.07×", "≥ 1.00×"]
    assert cells[5][2:5] == ["—", "—", "—"]  # not measured


def test_the_final_line_counts_targets_met() -> None:
    assert report.summary(_rows()) == "bench: 2/4 targets met"
    assert report.summary([]) == "bench: 0/0 targets met"


def test_notes_explain_misses() -> None:
    notes = report.notes(_rows())
    assert notes == ["- 2: Missed. why", "- 5: Not measured: x."]


def test_the_results_file_describes_the_machine_and_ends_with_the_final_line() -> None:
    text = report.results_file(
        _rows(), machine={"CPU": "a CPU", "Cores": "2"}, pairs=5, most=9, warmup=1, seconds=75
    )
    assert "- CPU: a CPU" in text and "1 min 15 s" in text
    assert "the first pair is dropped as warm-up, and each\nfigure keeps the next 5." in text
    assert "takes more pairs, up to 9, until" in text
    assert report.table(_rows()) in text
    assert text.rstrip().splitlines()[-1] == "bench: 2/4 targets met"


def test_figures_are_selected_by_number() -> None:
    assert [f.label for f in select([3, 6])] == ["3", "3 xla", "3 ref", "6a", "6b"]
    assert select(None) == list(FIGURES)
    with pytest.raises(ValueError, match="no figure"):
        select([99])
    for figure in FIGURES:
        assert callable(figure.load())


def test_the_sampler_charges_time_to_the_call_the_anchor_is_in() -> None:
    # This file is the anchor: time in `statistics.mean` (pure Python) is charged to
    # "mean", sleeping (a built-in, which has no frame) to the anchor itself.
    sampler = StackSampler(__file__, interval=0.001)
    numbers = [Fraction(i, 7) for i in range(100_000)]  # about 20 ms of mean
    done = threading.Event()

    def work() -> None:
        sampler.start(threading.get_ident())
        deadline = time.perf_counter() + 0.8
        while time.perf_counter() < deadline:
            began = time.perf_counter()
            statistics.mean(numbers)
            # As long asleep as in `mean`: half and half, however loaded the machine.
            time.sleep(time.perf_counter() - began)
        sampler.stop()
        done.set()

    started = time.perf_counter()
    threading.Thread(target=work).start()
    done.wait(scaled(10))
    elapsed = time.perf_counter() - started

    # A moment may go to starting the sampler's own thread, and a last look may find the
    # worker past its function, in `threading`'s code (elsewhere).
    allowed = {"mean", ANCHOR_ITSELF, "Thread.start", OUTSIDE}
    assert {"mean", ANCHOR_ITSELF} <= set(sampler.seconds) <= allowed
    total = sum(sampler.seconds.values())
    assert sampler.seconds[OUTSIDE] < 0.05 * total
    assert 0.5 * elapsed <= total <= elapsed
    # About half the time goes to `mean`.
    assert 0.25 <= sampler.seconds["mean"] / total <= 0.75


@pytest.fixture(scope="module")
def clocked_run(tmp_path_factory):
    """A real two-step LeNet run through a `ClockedStore`, and the hook's calls."""
    calls = []
    store = ClockedStore(
        tmp_path_factory.mktemp("bench") / "lab.sqlite",
        on_append=lambda run_id, step: calls.append((run_id, step, threading.get_ident())),
    )
    engine = Engine(store, max_concurrent=1)
    config = RunConfig(
        model="lenet",
        dataset="mnist-5k",
        optimizer="adamw",
        max_steps=2,
        log_every=1,
        **NO_INSTRUMENTS,
    )
    run_id = engine.start(config)
    status = engine.wait(run_id, scaled(120))
    yield store, run_id, status, calls
    engine.close()


def test_the_clock_notes_the_start_and_every_logged_step(clocked_run) -> None:
    store, run_id, status, calls = clocked_run
    assert status.status == "completed"
    times = store.times(run_id)
    assert sorted(times) == [1, 2]
    assert store.started(run_id) < times[1] < times[2]
    assert store.steady_rate(run_id, 1, 2) == pytest.approx(1 / (times[2] - times[1]))
    # The hook runs in the run's own thread, after each append.
    assert [(r, step) for r, step, _ in calls] == [(run_id, 1), (run_id, 2)]
    assert calls[0][2] != threading.get_ident()


def test_synthetic_telemetry_has_the_keys_of_a_real_run(clocked_run) -> None:
    store, run_id, *_ = clocked_run
    real = store.read_metrics(run_id).keys
    assert set(real) == {*synthetic.STEP_KEYS, *synthetic.EPOCH_KEYS}

    rows = synthetic.rows(2 * synthetic.STEPS_PER_EPOCH)
    assert [step for step, _ in rows] == list(range(1, 2 * synthetic.STEPS_PER_EPOCH + 1))
    with_epoch_keys = [step for step, values in rows if "val_loss" in values]
    assert with_epoch_keys == [synthetic.STEPS_PER_EPOCH, 2 * synthetic.STEPS_PER_EPOCH]
    assert {values["clip_active"] for _, values in rows} <= {0.0, 1.0}


def test_a_quick_run_of_the_store_figures(tmp_path, capsys) -> None:
    results = tmp_path / "results.md"

    assert main(["--quick", "--only", "6", "--results", str(results)]) == 0

    out = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"bench: [01]/1 targets met", out[-1])
    assert any(line.startswith("| 6a ") for line in out)
    assert any(line.startswith("| 6b ") for line in out)
    text = results.read_text()
    assert "## Machine" in text and "| 6b " in text
    assert text.rstrip().splitlines()[-1] == out[-1]


@pytest.mark.slow
def test_a_quick_run_of_the_sweep_figures(tmp_path, capsys) -> None:
    """Figures 18 and 19 run `optlab sweep` and the plain Optuna script for real, small,
    and report what they measured (their targets are the full run's to judge)."""
    assert (
        main(["--quick", "--only", "18,19", "--pairs", "1", "--results", str(tmp_path / "r")]) == 0
    )

    out = capsys.readouterr().out.splitlines()
    rows = {
        cells[0]: cells
        for line in out
        if line.startswith("| 1")
        for cells in [[cell.strip() for cell in line.strip("|").split("|")]]
    }
    # Measured, each side: a figure that failed shows "—" in its A and B columns.
    assert rows["18"][2].endswith(" trials/min") and rows["18"][3].endswith(" trials/min")
    assert rows["19"][2].endswith(" steps") and rows["19"][3].endswith(" steps")
    notes = "\n".join(out)
    assert "- 18: " in notes and "the same learning rates on both sides" in notes
    assert "- 19: " in notes and "best validation accuracy with the pruner / without" in notes
    assert re.fullmatch(r"bench: [0-2]/2 targets met", out[-1])


def test_the_per_layer_ways_agree_and_stacking_cuts_the_deep_models_ops(capsys) -> None:
    """`python -m bench.per_layer_ways`, small: the four ways are checked against each
    other before they are timed, and the deep MLP's repeated shapes take fewer ops stacked,
    fewer still stacked once for every statistic, its kernels of 4,096 entries too."""
    per_layer_ways.main(
        ["--models", "lenet", bench_models.DEEP_MLP, "--calls", "1", "--pairs", "1"]
    )

    out = capsys.readouterr().out.splitlines()
    assert out[0] == "lenet (10 variables)" and out[5] == "deep_mlp (100 variables)"
    ops = {
        found[1]: int(found[2])
        for line in out[6:10]
        for found in [re.match(r"  (.+?) +(\d+) ops ", line)]
        if found
    }
    assert ops["stacked by shape"] < ops["per variable"] / 1.5, ops
    assert ops["stacked once"] < ops["stacked by shape"] / 3, ops


def test_bad_arguments_exit_with_status_2(capsys) -> None:
    for argv in (["--only", "42"], ["--only", "x"], ["--pairs", "0"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
    assert "no figure" in capsys.readouterr().err


def test_an_op_profile_says_which_ops_spend_more() -> None:
    ours = OpProfile({"Sum": 0.004, "Sqrt": 0.001, "MatMul": 0.002})
    theirs = OpProfile({"Sum": 0.001, "MatMul": 0.003})
    assert ours.excess_over(theirs) == "+3.00 ms: Sum +3.00 ms, Sqrt +1.00 ms"


def test_the_op_time_telemetry_adds_to_a_trainer_step_is_profiled() -> None:
    """What explains figures 1 and 2 when they miss: the traced step's ops with telemetry
    (per-layer norms, sparsity, distance from the initial weights) and without, as the
    run takes most of its steps."""
    on = digits_trial(optimizer="adamw", per_layer_every=1)  # logs every step
    off = on.replace(telemetry=False, log_every=100, per_layer_every=None)
    with_telemetry, without = training._trainer_ops(on), training._trainer_ops(off)
    assert with_telemetry.total > 0 and without.total > 0
    # The statistics' own ops are in the profile (on a model this small their share of
    # the time is within the noise): the sums that gather variables into layers.
    assert "UnsortedSegmentSum" in with_telemetry.seconds
    assert "UnsortedSegmentSum" not in without.seconds
    assert "UnsortedSegmentSum +" in with_telemetry.excess_over(without, top=1000)
    # Where the budget spaces them, most steps have none, and the profile is of those.
    budgeted = training._trainer_ops(on.replace(per_layer_every=None))
    assert "UnsortedSegmentSum" not in budgeted.seconds


def test_the_bench_models_have_the_variables_their_figures_name() -> None:
    bench_models.register()
    for name, variables in (
        (bench_models.DEEP_MLP, 100),
        (bench_models.MIXED_MLP, 76),
        (bench_models.DEEP_VIT, 135),
    ):
        model = models.build(name, input_shape=(28, 28, 1), num_classes=10, seed=0)
        assert len(model.trainable_variables) == variables
    mixed = models.build(bench_models.MIXED_MLP, input_shape=(28, 28, 1), num_classes=10, seed=0)
    kernels = {v.shape.num_elements() for v in mixed.trainable_variables if len(v.shape) == 2}
    assert {1024, 4096, 16384} <= kernels  # small, mid-size and large, as figure 24 says


@pytest.mark.slow
def test_a_quick_run_of_the_whole_run_telemetry_figures(tmp_path, capsys) -> None:
    """Figure 24 trains whole runs with telemetry and without, small, and reports their
    steps/s (its target is the full run's to judge)."""
    assert main(["--quick", "--only", "24", "--pairs", "1", "--results", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out if line.startswith("| 24")]
    assert len(rows) == 2 and all(row.count(" steps/s") == 2 for row in rows), out
