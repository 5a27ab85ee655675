"""`python -m core sweep`: a search from the command line, its trials as a live table,
and one study worked by two processes (two machines) on a shared PostgreSQL store."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import optuna
import psycopg
import pytest

from core.cli import sweeping
from core.readable import number as readable_number
from core.store import Store
from core.sweep.analysis import importance_lines, importances, load_study
from tests.app_server import free_port
from tests.cli import run_main
from tests.lean import NO_INSTRUMENTS_FLAGS
from tests.postgres_server import PostgresServer
from tests.waiting import scaled, wait_for

ROOT = Path(__file__).resolve().parents[2]
# 8×8 digits at batch 64: 22 steps an epoch, validated every 11 steps.
BASE = [
    *("--dataset", "digits", "--model", "mlp", "--optimizer", "sgd", "--val-every", "11"),
    *NO_INSTRUMENTS_FLAGS,
]
# The application name of the second driver's connections (libpq reads `PGAPPNAME`).
SECOND = "optlab second driver"
SEARCH = ["--param", "learning_rate=0.01:1:log", "--sampler", "random"]


def test_a_sweep_prints_each_trial_and_the_best(tmp_path) -> None:
    store = tmp_path / "lab.sqlite"
    code, out, err = run_main(
        "sweep", "--store", store, "--study", "cli", "--trials", "3", "--sampler-seed", "1",
        *SEARCH, *BASE, "--max-steps", "22",
    )  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "sweep cli: 3 trials"
    assert lines[1] == (
        "a trial's value: the best val_accuracy its run validated at, not the last "
        "(maximized); a pruned trial's, its last reported one"
    )
    assert lines[2].split() == ["trial", "state", "value", "learning_rate", "run"]
    rows = [line.split() for line in lines[3:-2]]
    assert sorted((int(r[0]), r[1]) for r in rows) == [
        (n, state) for n in range(3) for state in ("COMPLETE", "RUNNING")
    ]
    # A RUNNING row has its value of the knob and its run, not blanks.
    assert all(len(row) == 4 for row in rows if row[1] == "RUNNING"), rows
    complete = {row[4]: row for row in rows if row[1] == "COMPLETE"}
    with Store(store) as opened:
        runs = {run.id: run for run in opened.list_runs()}
    assert sorted(run.name for run in runs.values()) == [f"sweep cli #{n}" for n in range(3)]
    for run_id, (_, _, value, rate, _) in complete.items():
        run = runs[run_id]
        assert float(value) == pytest.approx(run.final_metrics["best_val_accuracy"], abs=5e-5)
        assert float(rate) == pytest.approx(
            run.config["hyperparameters"]["learning_rate"], rel=1e-3
        )
    assert lines[-2] == "sweep cli done: 3/3 trials finished (0 pruned, 0 failed)"
    best = max(complete.values(), key=lambda row: float(row[2]))
    assert lines[-1].startswith(
        f"best validation accuracy: {best[2]} (trial {best[0]}, run {best[4]}) learning_rate="
    )


def test_optuna_dashboard_reads_the_labs_studies(tmp_path) -> None:
    """A user who knows Optuna Dashboard points it at the lab's store, as docs/cli.md says."""
    store = tmp_path / "lab.sqlite"
    code, _, err = run_main(
        "sweep", "--store", store, "--study", "seen", "--trials", "2", "--sampler-seed", "1",
        *SEARCH, *BASE, "--max-steps", "11",
    )  # fmt: skip
    assert code == 0, err
    with Store(store) as opened:
        rates = sorted(r.config["hyperparameters"]["learning_rate"] for r in opened.list_runs())
    known = known_study(f"sqlite:///{store}")
    port = free_port()
    command = [str(Path(sys.executable).parent / "optuna-dashboard"), f"sqlite:///{store}"]
    server = subprocess.Popen(
        [*command, "--host", "127.0.0.1", "--port", str(port), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:

        def get(path: str) -> Any:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{port}{path}", timeout=scaled(10)
            ) as reply:
                return json.load(reply)

        def answers() -> bool:
            assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
            try:
                return bool(get("/api/studies"))
            except OSError:
                return False

        wait_for(answers, 60, "optuna-dashboard's API")
        studies = {s["study_name"]: s for s in get("/api/studies")["study_summaries"]}
        assert studies.keys() == {"seen", "known"}
        detail = get(f"/api/studies/{studies['seen']['study_id']}")
        trials = detail["trials"]
        assert [t["state"] for t in trials] == ["Complete", "Complete"]
        read = sorted(float(t["params"][0]["param_external_value"]) for t in trials)
        assert read == pytest.approx(rates, rel=1e-3)
        assert all(t["values"] for t in trials)
        # Its importances are the lab's: Optuna's default evaluator, on all trials.
        path = f"/api/studies/{studies['known']['study_id']}/param_importances"
        (drawn,) = get(path)["param_importances"]
        told = importances(known).knobs
        assert (
            [d["name"] for d in drawn] == [k.name for k in told] == ["learning_rate", "clip_norm"]
        )
        assert [d["importance"] for d in drawn] == pytest.approx([k.value for k in told], rel=1e-12)
    finally:
        server.terminate()
        server.wait(scaled(10))


def known_study(storage: str) -> optuna.Study:
    """A study "known" of 12 trials written into `storage` (nothing trains), whose value
    follows the learning rate's log, and a little the clip norm."""
    study = optuna.create_study(storage=storage, study_name="known", direction="maximize")
    space = {
        "learning_rate": optuna.distributions.FloatDistribution(1e-3, 1.0, log=True),
        "clip_norm": optuna.distributions.FloatDistribution(0.1, 10.0),
    }
    for i in range(12):
        rate, clip = 10 ** (-3 + 3 * ((i * 5) % 12) / 11), 0.1 + (i * 7 % 12) * 0.8
        params = {"learning_rate": rate, "clip_norm": clip}
        value = 0.9 + 0.1 * math.log10(rate) + 0.002 * clip
        study.add_trial(optuna.trial.create_trial(params=params, distributions=space, value=value))
    return study


def test_a_finished_sweep_is_not_failed_by_its_analysis(tmp_path, monkeypatch) -> None:
    """The importances are advice on trials that ran: their failure is reported, and the
    exit status is the sweep's (it once ended a finished sweep with exit 1)."""

    def failing(study: optuna.Study) -> None:
        raise RuntimeError("Encountered zero total variance in all trees.")

    monkeypatch.setattr(sweeping, "importances", failing)
    code, out, err = run_main(
        "sweep", "--store", tmp_path / "lab.sqlite", "--study", "advice", "--trials", "2",
        *SEARCH, *BASE, "--max-steps", "11",
    )  # fmt: skip
    assert code == 0, err
    assert out.splitlines()[-1].startswith("best validation accuracy: ")
    assert (
        "error: sweep advice: its importances failed: "
        "RuntimeError('Encountered zero total variance in all trees.')\n"
    ) in err


def test_a_sweep_over_repeats_prints_each_trials_mean_and_interval(tmp_path) -> None:
    store = tmp_path / "lab.sqlite"
    code, out, err = run_main(
        "sweep", "--store", store, "--study", "seeds", "--trials", "2", "--repeats", "2",
        *SEARCH, *BASE, "--max-steps", "22",
    )  # fmt: skip
    assert code == 0, err
    complete = [line.split() for line in out.splitlines() if " COMPLETE " in line]
    assert len(complete) == 2
    with Store(store) as opened:
        runs = {run.id: run for run in opened.list_runs()}
    assert len(runs) == 4 and len({run.config["group"] for run in runs.values()}) == 2
    for number, _, mean, plus_minus, spread, _, first_run in complete:
        group = runs[first_run].config["group"]
        bests = [
            r.final_metrics["best_val_accuracy"]
            for r in runs.values()
            if r.config["group"] == group
        ]
        assert plus_minus == "±" and float(spread) >= 0
        assert float(mean) == pytest.approx(sum(bests) / 2, abs=5e-5), number


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--param", "learning_rate"], "param: 'learning_rate' is not NAME=LOW:HIGH"),
        (["--param", "nope=1:2"], "nope: is not a run field or a "),
        # Named by the knob and its part (issue 39), not "dimensions[0].low".
        (["--param", "learning_rate=0:1"], "learning_rate, low: must be in (0, 100]"),
        (["--param", "learning_rate=0.1:1", "--parallel", "0"], "parallel: must be in [1, "),
        (["--param", "learning_rate=0.1:1"], "n_trials: is required unless the sampler is grid"),
        ([], "param: give at least one --param"),
        (
            ["--param", "learning_rate=0.1:1", "--trials", "2", "--repeats", "0"],
            "repeats: must be a whole number in [1, 100]",
        ),
        (["--study", "elsewhere"], "no store at"),
        (
            ["--param", "learning_rate=0.1:1", "--trials", "2", "--objective", "time_to_target"],
            "target: is required for time_to_target",
        ),
        (
            ["--param", "learning_rate=0.1:1", "--trials", "2", "--target", "0.9"],
            "target: applies to time_to_target only",
        ),
        (
            [*("--param", "learning_rate=0.1:1", "--trials", "2"), "--objective", "val_mae"],
            "objective: val_mae needs a dataset that logs it; a classification logs val_accuracy",
        ),
        (["--study", "s", "--report", *SEARCH], "report: reads a stored study: give --study"),
        (["--report"], "study: --report needs --study NAME"),
        (["--study", "elsewhere", "--report"], "no store at"),
    ],
)
def test_bad_input_is_named_and_writes_nothing(tmp_path, flags, message) -> None:
    store = tmp_path / "lab.sqlite"
    code, out, err = run_main("sweep", "--store", store, *flags, *BASE)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err
    assert not store.exists()


def test_joining_a_study_the_store_lacks_is_refused(tmp_path) -> None:
    store = tmp_path / "lab.sqlite"
    Store(store).close()
    code, _, err = run_main("sweep", "--store", store, "--study", "absent")
    assert code == 2 and "study: no study 'absent'" in err


def test_a_sweep_ends_with_each_knobs_importance_and_report_reads_its_study(tmp_path) -> None:
    store = tmp_path / "lab.sqlite"
    code, out, err = run_main(
        "sweep", "--store", store, "--study", "why", "--trials", "5", "--sampler-seed", "2",
        *SEARCH, "--param", "batch_size=16,64", *BASE, "--max-steps", "22",
    )  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    assert lines[-4].startswith("best validation accuracy: ")
    printed = lines[-2:]
    pattern = r"importance (learning_rate|batch_size) (\S+) \[(\S+), (\S+)\]"
    matches = [re.fullmatch(pattern, line) for line in printed]
    assert all(matches), printed
    assert {m[1] for m in matches} == {"learning_rate", "batch_size"}
    values = [float(m[2]) for m in matches]
    assert values == sorted(values, reverse=True)
    assert all(float(m[3]) <= float(m[2]) <= float(m[4]) for m in matches)
    # What Optuna says on the stored study (its default evaluator, Optuna Dashboard's),
    # with the interval the same resamples give.
    with Store(store) as opened:
        study = load_study(opened, "why")
        best = max(r.final_metrics["best_val_accuracy"] for r in opened.list_runs())
    found = importances(study)
    assert lines[-3] == f"importances: {found.describe()}"
    assert found.describe().startswith("PED-ANOVA, Optuna's default evaluator, on all 5 trials")
    assert printed == importance_lines(found)
    optunas = optuna.importance.get_param_importances(study)
    assert {k.name: k.value for k in found.knobs} == {k: float(v) for k, v in optunas.items()}

    code, report, err = run_main("sweep", "--store", store, "--study", "why", "--report")
    assert code == 0, err
    summary = report.splitlines()
    best_text = readable_number(best)
    assert summary[0].startswith(f"Best validation accuracy: {best_text} (one seed: no interval")
    assert summary[1].startswith("Knobs that matter, in order: ")
    assert summary[1].endswith(f"(importance by {found.describe()}).")
    assert summary[2].startswith("The best quarter (2 of 5 completed trials) lie at: ")
    assert summary[3].startswith(("Widen ", "No search range needs widening"))
    assert summary[-3:] == lines[-3:]
    with Store(store) as opened:
        assert len(opened.list_runs()) == 5  # a report runs nothing

    code, _, err = run_main("sweep", "--store", store, "--study", "absent", "--report")
    assert code == 2 and "study: no study 'absent'" in err
    optuna.create_study(
        storage=f"sqlite:///{store}", study_name="pareto", directions=["maximize", "minimize"]
    )
    code, _, err = run_main("sweep", "--store", store, "--study", "pareto", "--report")
    assert code == 2 and "study: 'pareto' has several objectives" in err


@pytest.mark.slow
def test_two_machines_work_one_study_on_a_postgresql_store(postgres) -> None:
    """The second driver joins with `--study NAME` alone; the budget is the study's, so
    the two share 8 trials, each run once, by whichever process asked for it."""
    url = postgres.create_schema()
    command = [sys.executable, "-m", "core", "sweep", "--store", url, "--parallel", "1"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    new_study = ["--study", "shared", "--trials", "8", "--sampler-seed", "1", *SEARCH, *BASE]
    first = subprocess.Popen(
        [*command, *new_study, "--max-steps", "44"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    second: subprocess.Popen[str] | None = None
    try:
        assert first.stdout.readline() == "sweep shared: 8 trials\n"  # the study exists
        # Hold the study's trials until the second driver, started, waits for them: the
        # first could otherwise run all 8 while the second starts (on CI it once did).
        with psycopg.connect(url) as held:
            held.execute("LOCK TABLE trials IN EXCLUSIVE MODE")  # reads go on, writes wait
            second = subprocess.Popen(
                [*command, "--study", "shared", "--sampler-seed", "2"],
                cwd=ROOT,
                env={**env, "PGAPPNAME": SECOND},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            wait_for(lambda: SECOND in waiting(postgres), 300, "the second driver waiting")
        second_out, second_errors = second.communicate(timeout=scaled(600))
        rest, errors = first.communicate(timeout=scaled(600))
    finally:
        for driver in (first, second):
            if driver is not None:
                driver.kill()
    assert first.returncode == 0, errors
    assert second.returncode == 0, second_errors
    assert second_out.startswith("sweep shared: 8 trials\n")
    with Store(url) as store:
        runs = store.list_runs()
    assert sorted(run.name for run in runs) == sorted(f"sweep shared #{n}" for n in range(8))
    assert {run.status for run in runs} == {"completed"}
    drivers = {run.owner.split(":")[1] for run in runs}  # the processes that trained them
    assert len(drivers) == 2 and str(first.pid) in drivers
    # Each driver is done when the budget is spent; the other's last trial may still run.
    for output in (rest, second_out):
        assert re.search(r"^sweep shared done: [1-8]/8 trials finished", output, re.MULTILINE)
        assert "best validation accuracy: " in output


def waiting(postgres: PostgresServer) -> set[str]:
    """The application names of the server's connections that wait for a lock."""
    with psycopg.connect(postgres.url(), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT DISTINCT a.application_name FROM pg_locks l "
            "JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted"
        ).fetchall()
    return {name for (name,) in rows}
