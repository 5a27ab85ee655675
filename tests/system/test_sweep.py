"""Sweeps: search spaces checked against knobs, trials as engine runs, grid, pruning,
divergence, stopping, resuming, and the study kept in the lab's SQLite file."""

from __future__ import annotations

import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from core.engine import Engine, RunConfig
from core.group_comparison import mean_interval
from core.knobs import InvalidHyperparameters
from core.optimizers import load_plugins
from core.store import Store
from core.sweep import (
    MAX_SEED,
    Dimension,
    SearchSpace,
    Sweep,
    SweepPlan,
    list_studies,
    parallel_rows,
    settings,
    storage_url,
    studies,
    varying,
)
from core.sweep.driver import settle_abandoned
from core.sweep.hosting import SweepHost
from core.sweep.samplers import startup_trials
from core.training.config import INSTRUMENT_FIELDS
from tests.apptest import written_run
from tests.lean import NO_INSTRUMENTS
from tests.sweep_studies import abandoned_trial
from tests.waiting import scaled, wait_for

PROJECT_ROOT = Path(__file__).resolve().parents[2]

# 8×8 digits: 22 steps per epoch at batch 64, validated every 11 steps; about a second a run.
BASE = RunConfig(
    dataset="digits",
    model="mlp",
    optimizer="sgd",
    hyperparameters={"learning_rate": 0.1},
    max_steps=44,
    epochs=2,
    val_every=11,
    **NO_INSTRUMENTS,
)
LR = Dimension("learning_rate", 1e-3, 1.0, log=True)
FAST = {"poll_interval": 0.05}


@pytest.fixture
def engine(tmp_path):
    # Metrics reach the store within 50 ms, so reports (and pruning) follow runs closely.
    engine = Engine(Store(tmp_path / "lab.sqlite", flush_interval=0.05), max_concurrent=4)
    yield engine
    engine.close()


def space(*dimensions: Dimension) -> SearchSpace:
    return SearchSpace(dimensions)


def load_study(engine: Engine, name: str) -> optuna.Study:
    """The study as any Optuna program opens it, from the lab's file."""
    return optuna.load_study(study_name=name, storage=f"sqlite:///{engine.store.path}")


# Search spaces --------------------------------------------------------------------------


def test_importing_core_sweep_imports_neither_tensorflow_nor_optuna() -> None:
    code = "import sys, core.sweep; print(sorted({'tensorflow', 'optuna'} & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_axes_take_their_type_and_grid_from_the_knob() -> None:
    lr, batch, seed, multitask, model = space(
        Dimension("learning_rate", 1e-3, 1.0, log=True, points=4),
        Dimension("batch_size", 16, 128, log=True, points=4),
        Dimension("seed", 0, 2, points=5),
        Dimension("multitask"),
        Dimension("model", choices=("mlp",)),
    ).axes(BASE)
    assert lr.grid() == [0.001, 0.01, 0.1, 1.0] and not lr.is_run_field
    assert lr.distribution() == optuna.distributions.FloatDistribution(1e-3, 1.0, log=True)
    assert batch.grid() == [16, 32, 64, 128] and batch.is_run_field
    assert batch.distribution() == optuna.distributions.IntDistribution(16, 128, log=True)
    assert seed.grid() == [0, 1, 2]  # five points, rounded to whole seeds, without repeats
    assert multitask.grid() == [False, True]  # a bool knob given nothing takes both values
    assert model.distribution() == optuna.distributions.CategoricalDistribution(("mlp",))


def test_a_trial_config_puts_run_fields_and_knobs_in_their_places() -> None:
    plan = SweepPlan.create(
        BASE,
        space(LR, Dimension("batch_size", choices=(32, 128))),
        n_trials=3,
        sampler="random",
        pruning=False,
        parallel=2,
        seed=0,
    )
    config = plan.config_for({"learning_rate": 0.03, "batch_size": 32}, name="t")
    assert config.batch_size == 32 and config.hyperparameters["learning_rate"] == 0.03
    assert config.name == "t" and config.replace(name=None, batch_size=64) == BASE.replace(
        hyperparameters={"learning_rate": 0.03}
    )
    assert SweepPlan.from_dict(plan.to_dict()) == plan


def test_a_trial_measures_only_the_instruments_its_plan_sets() -> None:
    asked = dict.fromkeys(INSTRUMENT_FIELDS) | {"sharpness_every": 7}
    base = BASE.replace(**asked)
    plan = SweepPlan.create(
        base, space(LR), n_trials=3, sampler="random", pruning=False, parallel=2, seed=0
    )
    trial = plan.trial_config({"learning_rate": 0.03}, name="t")
    assert {name: getattr(trial, name) for name in INSTRUMENT_FIELDS} == dict.fromkeys(
        INSTRUMENT_FIELDS, 0
    ) | {"sharpness_every": 7}
    assert trial.replace(**asked) == (plan.config_for({"learning_rate": 0.03}, name="t"))
    # The best config, trained on its own, keeps the defaults.
    assert plan.config_for({"learning_rate": 0.03}).alpha_every is None


@pytest.mark.parametrize(
    ("dimension", "field", "reason"),
    [
        (Dimension("learning_rate", 0.0, 1.0), "learning_rate, low", "(0, 100]"),
        (Dimension("learning_rate", 1e-3, 1e3), "learning_rate, high", "(0, 100]"),
        (Dimension("learning_rate", 1.0, 0.1), "learning_rate, high", "at least low"),
        (Dimension("weight_decay", 0.0, 0.1, log=True), "weight_decay, low", "log scale"),
        (Dimension("beta_1", 0.8, 0.99), "beta_1", "not a run field or a sgd knob"),
        (Dimension("optimizer", choices=("sgd", "adam")), "optimizer", "cannot be swept"),
        (Dimension("batch_size", 16.5, 64), "batch_size, low", "whole number"),
        (Dimension("radius"), "radius, low", "is required"),
        (Dimension("model", choices=("mlp", "transformer")), "model, choice 2", "one of"),
        (Dimension("learning_rate", 0.1, 1.0, points=0), "learning_rate, points", "[1, 100]"),
    ],
)
def test_an_invalid_dimension_is_refused_naming_its_knob(engine, dimension, field, reason) -> None:
    """Named by the knob and the part of it, as the user wrote them (issue 39: not
    `dimensions[0].low`)."""
    with pytest.raises(InvalidHyperparameters) as caught:
        Sweep(engine, BASE, space(dimension), n_trials=2, sampler="random")
    assert reason in caught.value.errors[field]
    assert engine.list() == [] and list_studies(engine) == []


def test_every_bad_argument_is_named_at_once(engine) -> None:
    with pytest.raises(InvalidHyperparameters) as caught:
        Sweep(
            engine,
            BASE,
            space(LR, Dimension("learning_rate", 0.1, 0.2)),
            n_trials=0,
            sampler="bayes",
            parallel=0,
            study_name="",
        )
    assert set(caught.value.errors) == {
        "learning_rate (twice)",  # varied by two rows
        "n_trials",
        "sampler",
        "parallel",
        "study_name",
    }
    with pytest.raises(InvalidHyperparameters, match="n_trials: is required"):
        Sweep(engine, BASE, space(LR), sampler="tpe")


def test_a_sweep_without_a_seed_draws_its_own_and_keeps_it(engine) -> None:
    first, second = (Sweep(engine, BASE, space(LR), n_trials=2, sampler="tpe") for _ in "ab")
    assert first.plan.seed != second.plan.seed  # else every sweep would sample alike
    assert 0 <= first.plan.seed <= MAX_SEED
    assert SweepPlan.from_dict(first.plan.to_dict()).seed == first.plan.seed  # and replays
    given = Sweep(engine, BASE, space(LR), n_trials=2, sampler="tpe", seed=1234)
    assert given.plan.seed == 1234


# Rows for tables and parallel coordinates -------------------------------------------------


def test_settings_are_a_configs_run_fields_and_knobs_flat() -> None:
    config = BASE.replace(name="mine", hyperparameters={"learning_rate": 0.1}).to_dict()
    flat = settings(config)
    assert flat["learning_rate"] == 0.1 and flat["batch_size"] == 64 and flat["model"] == "mlp"
    assert "name" not in flat and "task_weights" not in flat and "hyperparameters" not in flat


def test_parallel_rows_keep_the_optimizer_and_what_varies() -> None:
    rows = [
        {"optimizer": "sgd", "learning_rate": 0.1, "batch_size": 64, "nesterov": None},
        {"optimizer": "sgd", "learning_rate": 1, "batch_size": 64, "nesterov": None},
        {"optimizer": "momentum", "learning_rate": 0.01, "batch_size": 64, "nesterov": True},
    ]
    assert varying(rows) == ["optimizer", "learning_rate", "nesterov"]
    assert varying(rows[:2]) == ["learning_rate"]  # equal batch sizes and Nones do not vary
    assert varying([{"flag": True}, {"flag": 1}]) == ["flag"]  # a bool is not a number
    drawn = parallel_rows(rows[:2], "val_accuracy", [0.9, None], keep=("optimizer",))
    assert drawn[0] == {"optimizer": "sgd", "learning_rate": 0.1, "val_accuracy": 0.9}
    assert drawn[1]["learning_rate"] == 1.0 and math.isnan(drawn[1]["val_accuracy"])
    drawn = parallel_rows(rows, "val_accuracy", [0.9, 0.8, 0.7])
    assert drawn[2] == {
        "optimizer": "momentum",  # categorical axes hold text
        "learning_rate": 0.01,
        "nesterov": "true",
        "val_accuracy": 0.7,
    }
    assert "nesterov" not in drawn[0]  # off: left for the chart to show as missing


# Sweeps -------------------------------------------------------------------------------


def test_a_random_sweep_runs_each_trial_as_an_engine_run(engine) -> None:
    # The instruments at their defaults: the trials' runs measure none of them.
    base = BASE.replace(**dict.fromkeys(INSTRUMENT_FIELDS))
    sweep = Sweep(engine, base, space(LR), n_trials=4, sampler="random", parallel=2, seed=3, **FAST)
    assert sweep.status().state == "idle"
    sweep.start()
    status = sweep.wait(scaled(120))
    assert status.state == "done" and status.finished == status.n_trials == 4

    study = load_study(engine, sweep.study_name)  # the lab's SQLite file holds the study
    trials = study.get_trials()
    assert [t.state.name for t in trials] == ["COMPLETE"] * 4
    runs = {run.id: run for run in engine.list()}
    assert len(runs) == 4
    for trial in trials:
        run = runs[trial.user_attrs["run_id"]]
        assert run.name == f"sweep {sweep.study_name} #{trial.number}"
        assert run.config["hyperparameters"]["learning_rate"] == trial.params["learning_rate"]
        assert {name: run.config[name] for name in INSTRUMENT_FIELDS} == NO_INSTRUMENTS
        assert trial.value == run.final_metrics["best_val_accuracy"]
        assert sorted(trial.intermediate_values) == [11, 22, 33, 44]
    # Never more than `parallel` runs at once, though the engine would take four.
    spans = [(run.created, run.finished) for run in runs.values()]
    assert max(sum(c <= start < f for c, f in spans) for start, _ in spans) == 2

    best = max(trials, key=lambda t: t.value)
    assert (status.best_value, status.best_params) == (best.value, best.params)
    assert status.best_run_id == best.user_attrs["run_id"]
    assert sweep.best_config() == base.replace(
        hyperparameters={"learning_rate": best.params["learning_rate"]}
    )
    rows = sweep.results()
    assert [(r.number, r.state, r.run_status, r.value) for r in rows] == [
        (t.number, "COMPLETE", "completed", t.value) for t in trials
    ]

    [summary] = list_studies(engine)
    assert (summary.study_name, summary.trials, summary.loadable) == (sweep.study_name, 4, True)
    assert (summary.finished, summary.running, summary.best_value) == (4, 0, status.best_value)
    with pytest.raises(InvalidHyperparameters, match="study_name"):  # the name is taken
        Sweep(engine, BASE, space(LR), n_trials=1, study_name=sweep.study_name).start()
    with Store(engine.store.path) as reopened:  # Optuna's tables do not upset the store
        assert len(reopened.list_runs()) == 4


def test_a_regression_sweep_minimizes_the_validation_mae(engine) -> None:
    load_plugins(PROJECT_ROOT / "plugins")  # the example regression, diabetes
    base = BASE.replace(dataset="diabetes", max_steps=20, epochs=10, val_every=5)
    rates = space(Dimension("learning_rate", 1e-3, 1e-1, log=True))
    sweep = Sweep(engine, base, rates, n_trials=3, sampler="random", parallel=2, seed=1, **FAST)
    assert sweep.plan.objective.metric == "val_mae"
    sweep.start()
    status = sweep.wait(scaled(120))
    assert status.state == "done" and status.finished == 3

    study = load_study(engine, sweep.study_name)
    assert study.direction.name == "MINIMIZE"
    runs = {run.id: run for run in engine.list()}
    trials = study.get_trials()
    for trial in trials:
        run = runs[trial.user_attrs["run_id"]]
        assert trial.value == run.final_metrics["best_val_mae"]
        assert sorted(trial.intermediate_values) == [5, 10, 15, 20]
    assert status.best_value == min(trial.value for trial in trials)
    assert Sweep.load(engine, sweep.study_name).status().best_value == status.best_value
    [summary] = list_studies(engine)
    assert summary.best_value == status.best_value


def test_a_grid_sweep_enumerates_exactly_the_grid(engine) -> None:
    grid = space(
        Dimension("learning_rate", 0.01, 1.0, log=True, points=3),
        Dimension("seed", choices=(0, 1)),
    )
    sweep = Sweep(engine, BASE.replace(max_steps=22), grid, sampler="grid", **FAST)
    assert sweep.plan.n_trials == 6  # the grid size, by default
    sweep.start()
    assert sweep.wait(scaled(120)).state == "done"
    tried = [(r.params["learning_rate"], r.params["seed"]) for r in sweep.results()]
    assert sorted(tried) == [(lr, seed) for lr in (0.01, 0.1, 1.0) for seed in (0, 1)]
    configs = [
        (r.config["hyperparameters"]["learning_rate"], r.config["seed"]) for r in engine.list()
    ]
    assert sorted(configs) == sorted(tried)
    capped = Sweep(engine, BASE, grid, sampler="grid", n_trials=100)
    assert capped.plan.n_trials == 6


@pytest.mark.parametrize(("n_trials", "startup"), [(1, 3), (20, 3), (40, 4), (50, 5), (500, 5)])
def test_the_default_pruner_judges_once_a_tenth_of_the_budget_has_finished(
    engine, n_trials, startup
) -> None:
    sweep = Sweep(engine, BASE, space(LR), n_trials=n_trials, sampler="random", pruning=True)
    sweep.submit()  # opens the study with its pruner; nothing drives it here
    pruner = sweep.study.pruner
    assert isinstance(pruner, optuna.pruners.MedianPruner)
    assert pruner._n_startup_trials == startup == startup_trials(n_trials)  # Optuna's field


def test_pruned_trials_stop_their_runs_early(engine) -> None:
    long = BASE.replace(max_steps=440, epochs=20)  # about ten seconds unless pruned
    sweep = Sweep(
        engine,
        long,
        space(LR),
        n_trials=2,
        sampler="random",
        pruning=True,
        pruner=optuna.pruners.ThresholdPruner(lower=1.1),  # prunes at every first report
        **FAST,
    )
    sweep.start()
    status = sweep.wait(scaled(120))
    assert status.state == "done"
    assert (status.finished, status.pruned, status.failed) == (2, 2, 0)
    [summary] = list_studies(engine)
    assert (summary.finished, summary.pruned, summary.failed, summary.best_value) == (2, 2, 0, None)
    trials = load_study(engine, sweep.study_name).trials
    for row, trial in zip(sweep.results(), trials, strict=True):
        run = engine.status(row.run_id)
        assert row.state == "PRUNED" and row.run_status == run.status == "stopped"
        assert row.step <= run.step < run.total_steps == 440
        assert row.value == trial.intermediate_values[row.step]  # its last report


def test_a_diverged_run_fails_its_trial_with_the_reason(engine) -> None:
    # Heavy-ball momentum at η = 100 overflows within a few steps.
    base = BASE.replace(optimizer="momentum", hyperparameters={"momentum": 0.99})
    lr = Dimension("learning_rate", choices=(0.1, 100.0))
    sweep = Sweep(engine, base, space(lr), sampler="grid", **FAST)
    sweep.start()
    assert sweep.wait(scaled(120)).state == "done"
    rows = {row.params["learning_rate"]: row for row in sweep.results()}
    assert (rows[0.1].state, rows[0.1].run_status) == ("COMPLETE", "completed")
    assert (rows[100.0].state, rows[100.0].run_status, rows[100.0].value) == (
        "FAIL",
        "diverged",
        None,
    )
    diverged_at = engine.status(rows[100.0].run_id).final_metrics["diverged_at"]
    assert rows[100.0].reason == f"the loss diverged at step {diverged_at}"
    assert sweep.status().best_params == {"learning_rate": 0.1}
    assert (sweep.status().failed, sweep.status().pruned) == (1, 0)


def test_stop_ends_the_sweep_and_its_runs_promptly(engine) -> None:
    long = BASE.replace(max_steps=20_000, epochs=1000)  # minutes a run
    sweep = Sweep(engine, long, space(LR), n_trials=6, sampler="random", **FAST)
    sweep.start()
    wait_for(lambda: sum(run.step > 0 for run in engine.list()) == 2)
    with pytest.raises(InvalidHyperparameters, match="already being run"):
        Sweep.load(engine, sweep.study_name).start()  # one driver per study
    began = time.monotonic()
    sweep.stop()
    status = sweep.wait(scaled(60))
    # Well under a second on an idle machine; a busy one may take seconds to reach the
    # next step (the first validation traces a graph).
    assert status.state == "stopped" and time.monotonic() - began < scaled(30)
    runs = engine.list()
    assert [run.status for run in runs] == ["stopped", "stopped"]
    assert all(run.step < 20_000 for run in runs)
    rows = sweep.results()
    assert [(r.state, r.reason) for r in rows] == [("FAIL", "the sweep was stopped")] * 2
    # Cut short: they run again if the sweep resumes, so they neither finish nor fail.
    assert (status.finished, status.failed) == (0, 0)


def test_listing_a_sweep_at_work_loads_no_study(engine, monkeypatch) -> None:
    """The Sweep page lists the studies at every refresh: while a live driver runs the
    trials, that reads their rows and loads no study (which costs a refresh much)."""
    long = BASE.replace(max_steps=20_000, epochs=1000)
    sweep = Sweep(engine, long, space(LR), n_trials=2, sampler="random", **FAST)
    sweep.start()
    try:
        wait_for(lambda: any(run.step > 0 for run in engine.list()))
        loads: list[str] = []
        monkeypatch.setattr(studies, "stored_study", lambda name, storage: loads.append(name))
        [summary] = list_studies(engine)
        assert summary.running >= 1 and loads == []
    finally:
        sweep.stop()
        sweep.wait(scaled(60))


def test_a_loaded_sweep_resumes_its_unfinished_trials(engine) -> None:
    sweep = Sweep(engine, BASE, space(LR), n_trials=3, sampler="random", parallel=1, **FAST)
    sweep.start()
    wait_for(lambda: len(sweep.results()) == 2 and sweep.results()[1].run_id)
    engine.pause(sweep.results()[1].run_id)  # holds the second trial mid-run
    wait_for(lambda: sweep.results()[1].run_status == "paused")
    sweep.stop()
    assert sweep.wait(scaled(30)).state == "stopped"
    first, cut = sweep.results()
    assert (first.state, cut.state, cut.reason) == ("COMPLETE", "FAIL", "the sweep was stopped")

    resumed = Sweep.load(engine, sweep.study_name, **FAST)
    assert resumed.plan == sweep.plan and resumed.results() == [first, cut]
    # Its state as its study says: the driver that stopped it recorded how it ended.
    assert (resumed.status().state, resumed.status().finished) == ("stopped", 1)
    resumed.start()
    status = resumed.wait(scaled(120))
    assert status.state == "done" and status.finished == 3
    rows = resumed.results()
    assert [r.state for r in rows] == ["COMPLETE", "FAIL", "COMPLETE", "COMPLETE"]
    retry = load_study(engine, sweep.study_name).trials[2]  # the cut trial's values, again
    assert retry.user_attrs["retry_of"] == cut.number and retry.params == cut.params
    assert rows[3].params != cut.params  # then a new trial fills the budget


def test_a_sweep_resumes_after_its_engine_closed(tmp_path) -> None:
    path = tmp_path / "lab.sqlite"
    engine = Engine(Store(path, flush_interval=0.05))
    long = BASE.replace(max_steps=20_000, epochs=1000)
    sweep = Sweep(engine, long, space(LR), n_trials=1, sampler="random", parallel=1, **FAST)
    sweep.start()
    wait_for(lambda: any(run.step > 0 for run in engine.list()))
    engine.close()  # as when the app exits: the run ends interrupted, the store closes
    status = sweep.wait(scaled(30))
    assert status.state == "failed" and "closed" in status.error
    [orphan] = load_study(engine, sweep.study_name).trials
    # The run ends interrupted as the store closes: the driver may tell the study first
    # (FAIL; seen beside two CPU-burning loops) or find the store closed (RUNNING, an
    # orphan). The restarted sweep settles either the same way.
    assert orphan.state.name in ("RUNNING", "FAIL")

    engine = Engine(Store(path, flush_interval=0.05))  # the app starts again
    try:
        resumed = Sweep.load(engine, sweep.study_name, **FAST)
        resumed.start()
        wait_for(lambda: len(resumed.results()) == 2 and resumed.results()[1].step)
        resumed.stop()
        assert resumed.wait(scaled(30)).state == "stopped"
        settled, retry = resumed.results()
        assert (settled.state, settled.run_status) == ("FAIL", "interrupted")
        assert retry.params == settled.params and retry.run_id != settled.run_id
    finally:
        engine.close()
    assert storage_url(engine) == f"sqlite:///{path.resolve()}"


# A sweep killed mid-trial ----------------------------------------------------------------

KILLED_DRIVER = """
import json, sys, time
from core.engine import Engine, RunConfig
from core.engine.client import EngineClient
from core.store import Store
from core.sweep import Dimension, SearchSpace, Sweep

path, name, engine_kind, base = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
store = Store(path, flush_interval=0.05)
engine = Engine(store) if engine_kind == "own engine" else EngineClient(store)
space = SearchSpace((Dimension("learning_rate", 1e-3, 1.0, log=True),))
sweep = Sweep(engine, RunConfig.from_dict(json.loads(base)), space, n_trials=2,
              sampler="random", parallel=2, study_name=name, poll_interval=0.05)
sweep.start()
while sum(row.run_id is not None for row in sweep.results()) < 2:
    time.sleep(0.02)
print("trials started", flush=True)
time.sleep(600)
"""


def start_and_kill_a_sweep(path: Path, name: str, engine_kind: str, base: RunConfig) -> None:
    """A process drives a two-trial sweep, and is killed (SIGKILL) once both runs started."""
    import json

    driver = subprocess.Popen(
        [
            sys.executable,
            "-c",
            KILLED_DRIVER,
            str(path),
            name,
            engine_kind,
            json.dumps(base.to_dict()),
        ],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
    )
    try:
        assert driver.stdout is not None and driver.stdout.readline() == b"trials started\n"
    finally:
        driver.kill()
        driver.wait(scaled(30))


def test_a_killed_sweeps_trials_end_as_their_runs_do(tmp_path) -> None:
    """The driver dies, the runs train on in the engine process: the engine tells each
    trial its run's result once the run ends, and not before; listing the studies tells
    none (a reader writes nothing)."""
    from tests.conftest import served

    path = tmp_path / "lab.sqlite"
    with served(path) as engine:
        start_and_kill_a_sweep(path, "killed", "client", BASE.replace(max_steps=1500, epochs=1000))
        runs = [run.id for run in engine.list()]
        wait_for(
            lambda: all(engine.status(run_id).status == "running" for run_id in runs),
            30,
            "the engine to take the sweep's runs",
        )
        for run_id in runs:
            engine.pause(run_id)  # still training: the trials must wait for them
        assert settle_abandoned(engine, load_study(engine, "killed"), driven_here=False) == 0
        [summary] = list_studies(engine)
        assert (summary.running, summary.finished) == (2, 0)
        for run_id in runs:
            engine.resume(run_id)
            assert engine.wait(run_id, scaled(120)).status == "completed"
        wait_for(lambda: list_studies(engine)[0].running == 0, 60, "the engine's settling")
        [summary] = list_studies(engine)
        assert (summary.running, summary.finished, summary.failed) == (0, 2, 0)
        best = {run_id: engine.status(run_id).final_metrics["best_val_accuracy"] for run_id in runs}
        trials = load_study(engine, "killed").trials
        assert {t.user_attrs["run_id"]: t.value for t in trials} == pytest.approx(best)
        assert all(t.state.name == "COMPLETE" for t in trials)


def test_only_the_engine_settles_an_abandoned_trial(tmp_path) -> None:
    """Reading a sweep (listing the studies, loading one, its status and trials) tells a
    trial its driver abandoned nothing, though its run has ended; the engine's sweep
    host tells it how the run went (issue 51, item 6: a viewer's Sweep page did)."""
    path = tmp_path / "lab.sqlite"
    run_id = written_run(Store(path), "ended", "an ended run", val_loss=0.2)
    engine = Engine(Store(path))
    try:
        trials = abandoned_trial(engine, "abandoned", run_id).get_trials
        before = trials()
        [summary] = list_studies(engine)
        sweep = Sweep.load(engine, "abandoned")
        assert (summary.running, sweep.status().running, sweep.results()[2].state) == (
            1,
            1,
            "RUNNING",
        )
        assert trials() == before

        host = SweepHost(engine, poll_interval=0.05)
        try:
            wait_for(lambda: trials()[2].state.name == "COMPLETE", 30, "the host's settling")
        finally:
            host.close()
        assert trials()[2].value == engine.status(run_id).final_metrics["best_val_accuracy"]
        assert trials()[:2] == before[:2]
    finally:
        engine.close()


def test_a_sweep_killed_with_its_engine_runs_its_trials_again_on_resume(tmp_path) -> None:
    """The engine that starts next (on the store, with its sweep host) settles the
    trials: their runs were interrupted, so they are cut short, and run again on resume."""
    from tests.conftest import served

    path = tmp_path / "lab.sqlite"
    start_and_kill_a_sweep(path, "killed", "own engine", BASE.replace(max_steps=20_000))
    with served(path) as engine:  # marks the dead engine's runs interrupted
        wait_for(lambda: list_studies(engine)[0].running == 0, 60, "the engine's settling")
        [summary] = list_studies(engine)
        assert (summary.running, summary.finished, summary.failed) == (0, 0, 0)
        killed = load_study(engine, "killed").trials
        assert [t.user_attrs.get("cut_short") for t in killed] == [True, True]
        assert [t.user_attrs.get("run_status") for t in killed] == ["interrupted"] * 2

        resumed = Sweep.load(engine, "killed", **FAST)
        resumed.start()
        wait_for(lambda: len(resumed.results()) == 4 and all(r.run_id for r in resumed.results()))
        resumed.stop()
        resumed.wait(scaled(30))
        retried = load_study(engine, "killed").trials[2:]
        assert sorted(t.user_attrs["retry_of"] for t in retried) == [0, 1]
        assert {t.params["learning_rate"] for t in retried} == {
            t.params["learning_rate"] for t in killed
        }


def test_a_sweep_over_repeats_values_each_trial_by_the_mean_of_its_seeds(engine) -> None:
    sweep = Sweep(
        engine, BASE, space(LR), n_trials=2, sampler="random", parallel=1, repeats=3, seed=5, **FAST
    )
    assert SweepPlan.from_dict(sweep.plan.to_dict()).repeats == 3  # kept with the study
    sweep.start()
    assert sweep.wait(scaled(180)).state == "done"
    runs = {run.id: run for run in engine.list()}
    assert len(runs) == 6
    for trial in load_study(engine, sweep.study_name).get_trials():
        run_ids = trial.user_attrs["run_ids"]
        assert len(run_ids) == 3 and run_ids[0] == trial.user_attrs["run_id"]
        members = [runs[run_id] for run_id in run_ids]
        assert len({m.config["group"] for m in members}) == 1
        assert sorted(m.config["seed"] for m in members) == [0, 1, 2]
        rates = {m.config["hyperparameters"]["learning_rate"] for m in members}
        assert rates == {trial.params["learning_rate"]}
        bests = [m.final_metrics["best_val_accuracy"] for m in members]
        assert trial.value == pytest.approx(statistics.mean(bests))
        assert trial.user_attrs["spread"] == pytest.approx(mean_interval(bests)[1])
        # What the pruner sees: the mean over the seeds at every validated step.
        assert sorted(trial.intermediate_values) == [11, 22, 33, 44]
        for step, reported in trial.intermediate_values.items():
            logged = []
            for member in members:
                metrics = engine.metrics(member.id)
                logged.append(float(metrics["val_accuracy"][metrics.steps == step][0]))
            assert reported == pytest.approx(statistics.mean(logged))
    rows = sweep.results()
    assert all(row.spread is not None and len(row.run_ids) == 3 for row in rows)
