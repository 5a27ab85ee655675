"""Figures 18 and 19: hyperparameter sweeps, run as `optlab sweep` runs them.

Each sweep is the command itself (`python -m core sweep`, its own process, with its engine
and its study in a new store), read back from that store once it has exited: so the
figures measure the lab's sweep whichever process drives its trials.

Figure 18, trial throughput: sgd trials of mlp on digits, 100 steps each, validated
every 20 steps, learning rates drawn log-uniformly by Optuna's random sampler: `optlab
sweep` at its defaults (2 trials at once; telemetry every step, the instruments off, as
a trial has them unless asked) against `bench.plain_study`, the same study as a plain
Optuna script calling `model.fit`, one trial after the other, in one process. Both sides
use the same sampler seed, so they train the same learning rates (checked). A sample is
trials per minute over the study: from its first trial's start to its last trial's end,
on Optuna's own clock (the trials' `datetime_start` and `datetime_complete`), on both
sides; each process's start (TensorFlow's import) is left out of both, and said in the
figure's note.

Figure 19, pruning: learning rates from 1e-5 to 1, where many trials stall; the same
sweep (`optlab sweep --pruning`, the lab's default median pruner) and without a pruner,
with the same sampler seed (so the same learning rates), for a few seeds. Steps trained
are the trials' runs' last steps, summed. The saving counts only at the same best value:
the pruned sweep's best validation accuracy must be within `SAME_BEST` of the unpruned
one's, seed by seed, else the figure is not measured.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import optuna

from bench.figures import Settings
from bench.plain_study import DATASET, MODEL, trial_rows
from bench.rows import Measured, NotMeasured
from bench.timing import Paired
from core.store import Metrics, RunRecord, Store
from core.sweep.driver import run_ids_of
from core.sweep.samplers import startup_trials

# Figure 18's study.
THROUGHPUT_RATES = (1e-3, 0.3)  # every trial trains: none diverges, none is cut short
VAL_EVERY = 20
SEED = 0
# Figure 19's study: most of 1e-5 to 1 (log scale) stalls, so the pruner has work to do.
PRUNING_RATES = (1e-5, 1.0)
PRUNING_STEPS = 200
#: How close the best validation accuracies of the pruned and unpruned sweeps must be to
#: be "the same best value": 0.01, about 4 of the 360 examples of digits' test split.
SAME_BEST = 0.01
# Seconds a sweep's process may take.
SWEEP_TIMEOUT = 900


def trial_throughput(settings: Settings) -> Measured:
    """Figure 18: trials per minute of `optlab sweep` and of the plain Optuna script."""
    trials, steps = settings.pick((20, 100), (3, 20))
    lab: list[dict[str, Any]] = []
    plain: list[dict[str, Any]] = []

    def lab_sample() -> float:
        lab.append(_lab_sweep(trials, steps, THROUGHPUT_RATES, pruning=False))
        if set(lab[-1]["states"]) != {"COMPLETE"}:
            raise RuntimeError(f"not every trial of the sweep completed: {lab[-1]['states']}")
        return _per_minute(lab[-1]["trials"])

    def plain_sample() -> float:
        plain.append(_plain_study(trials, steps))
        rates = sorted(row["learning_rate"] for row in plain[-1]["trials"])
        if rates != sorted(row["learning_rate"] for row in lab[-1]["trials"]):
            raise RuntimeError("the two studies drew different learning rates")
        return _per_minute(plain[-1]["trials"])

    paired = settings.interleave(lab_sample, plain_sample)
    return Measured.compared(
        paired,
        "trials/min",
        diagnose=lambda: _where_a_trial_goes(lab, plain),
        detail=(
            f"{trials} trials of {steps} steps, the same learning rates on both sides. A "
            f"trial took {_median_trial(lab)} in the lab (2 at once) and "
            f"{_median_trial(plain)} in the script; a process took {_median_wall(lab)} "
            f"(lab) and {_median_wall(plain)} (script) from its start to its exit."
        ),
    )


def pruning(settings: Settings) -> Measured:
    """Figure 19: steps trained by the same sweep with the default pruner and without."""
    trials, steps = settings.pick((20, PRUNING_STEPS), (6, 40))
    seeds = settings.pick((0, 1, 2), (0,))
    pruned: list[dict[str, Any]] = []
    full: list[dict[str, Any]] = []
    for seed in seeds:
        for sweeps, on in ((pruned, True), (full, False)):
            sweeps.append(_lab_sweep(trials, steps, PRUNING_RATES, pruning=on, seed=seed))
    pairs = list(zip(pruned, full, strict=True))
    for seed, (a, b) in zip(seeds, pairs, strict=True):
        if abs(a["best"] - b["best"]) > SAME_BEST:
            raise NotMeasured(
                f"with sampler seed {seed}, the best validation accuracy was {a['best']:.4f} "
                f"with the pruner and {b['best']:.4f} without: not the same best value "
                f"(within {SAME_BEST})"
            )
    saved = ", ".join(f"{1 - a['steps'] / b['steps']:.0%}" for a, b in pairs)
    bests = ", ".join(f"{a['best']:.4f} / {b['best']:.4f}" for a, b in pairs)
    paired = Paired(tuple(a["steps"] for a in pruned), tuple(b["steps"] for b in full))
    return Measured.compared(
        paired,
        "steps",
        diagnose=lambda: _where_the_steps_go(pruned, trials, steps),
        detail=(
            f"{trials} trials of {steps} steps, validated every {VAL_EVERY}, learning rates "
            f"{PRUNING_RATES[0]:g} to {PRUNING_RATES[1]:g}, sampler seeds "
            f"{', '.join(map(str, seeds))}. Saved: {saved}; trials pruned: "
            f"{', '.join(str(a['pruned']) for a in pruned)}; best validation accuracy with "
            f"the pruner / without: {bests} (the same within {SAME_BEST}, seed by seed)."
        ),
    )


def _lab_sweep(
    trials: int,
    steps: int,
    rates: tuple[float, float],
    *,
    pruning: bool,
    seed: int = SEED,
) -> dict[str, Any]:
    """One `optlab sweep` at its defaults (2 trials at once; telemetry, so every step,
    logged: a run's last stored step is the last it took) in a new store: its trials
    (`trial_rows`), the steps its runs trained, its pruned trials, its best value and its
    process's wall seconds."""
    with tempfile.TemporaryDirectory() as folder:
        store_path = Path(folder) / "lab.sqlite"
        command = [
            *("--store", str(store_path), "--study", "bench"),
            *("--model", MODEL, "--dataset", DATASET, "--optimizer", "sgd"),
            *("--max-steps", str(steps), "--val-every", str(VAL_EVERY)),
            *("--param", f"learning_rate={rates[0]:g}:{rates[1]:g}:log"),
            *("--trials", str(trials), "--sampler", "random", "--sampler-seed", str(seed)),
            *(("--pruning",) if pruning else ()),
        ]
        wall = _run([sys.executable, "-m", "core", "sweep", *command])
        study = optuna.load_study(study_name="bench", storage=f"sqlite:///{store_path}")
        with Store(store_path) as store:
            runs = [
                (t, store.get_run(r), store.read_metrics(r))
                for t in study.trials
                for r in run_ids_of(t)
            ]
        states = [t.state.name for t in study.trials]
        return {
            "trials": trial_rows(study.trials),
            "steps": sum(record.step for _, record, _ in runs if record is not None),
            "phases": [_phases(*run) for run in runs if len(run[2])],  # it logged
            "states": states,
            # The last step each pruned trial's run took.
            "stopped": [
                record.step
                for t, record, _ in runs
                if t.state.name == "PRUNED" and record is not None
            ],
            "pruned": states.count("PRUNED"),
            "best": study.best_value,
            "wall": wall,
        }


def _phases(
    trial: optuna.trial.FrozenTrial, record: RunRecord | None, metrics: Metrics
) -> dict[str, float]:
    """Where a lab trial's seconds went, from the study's and the store's own clocks:
    `queued` (Optuna's ask to the run's start), `setup` (to its first logged step: data,
    model, tracing), `training` (to its last: steps and validations), `ending` (to its
    end) and `told` (until the sweep told Optuna)."""
    assert record is not None and record.started is not None and record.finished is not None
    wall = metrics["wall_time"]
    return {
        "queued": record.started - trial.datetime_start.timestamp(),
        "setup": wall[0] - record.started,
        "training": wall[-1] - wall[0],
        "ending": record.finished - wall[-1],
        "told": trial.datetime_complete.timestamp() - record.finished,
    }


def _where_a_trial_goes(lab: list[dict[str, Any]], plain: list[dict[str, Any]]) -> str:
    """Figure 18's note when it misses: the median of each phase of a lab trial (see
    `_phases`), against a script trial's whole."""
    phases = [phase for sample in lab for phase in sample["phases"]]
    parts = ", ".join(
        f"{name} {statistics.median(p[name] for p in phases):.2f} s" for name in phases[0]
    )
    return (
        f"Timed from the study's and the store's clocks, a lab trial's median phases: {parts} "
        "(queued: Optuna's ask to its run's start; setup: to the first logged step, the "
        "dataset, model and tracing; training: to the last, steps and validations; ending: "
        "to the run's end; told: until the sweep told Optuna). A script trial, "
        f"`model.fit` with its tracing, took {_median_trial(plain)} in all."
    )


def _where_the_steps_go(pruned: list[dict[str, Any]], trials: int, steps: int) -> str:
    """Figure 19's note when it misses: when the pruner judges, how many trials it
    stopped, and where their runs stopped."""
    stopped = [step for sweep in pruned for step in sweep["stopped"]]
    counts = ", ".join(str(sweep["pruned"]) for sweep in pruned)
    where = (
        f"a pruned trial's run stopped at step {statistics.median(stopped):.0f} of {steps} (median)"
        if stopped
        else "no trial was pruned"
    )
    return (
        f"The median pruner judges no trial until {startup_trials(trials)} have completed, then a "
        "trial's best value so far against the median of the completed trials' at its "
        f"step (pruned ones do not count); of the {trials} trials it stopped {counts}, "
        f"and {where}."
    )


def _plain_study(trials: int, steps: int) -> dict[str, Any]:
    """One run of `bench.plain_study`: its trials and its process's wall seconds."""
    low, high = THROUGHPUT_RATES
    command = [
        *("--trials", str(trials), "--steps", str(steps), "--val-every", str(VAL_EVERY)),
        *("--seed", str(SEED), "--low", str(low), "--high", str(high)),
    ]
    out: list[str] = []
    wall = _run([sys.executable, "-m", "bench.plain_study", *command], out)
    return {"trials": json.loads(out[-1]), "wall": wall}


def _run(command: list[str], out: list[str] | None = None) -> float:
    """Runs `command` to its end; returns its wall seconds (and its stdout's lines in
    `out`). Raises `RuntimeError` with its stderr's end if it fails."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=SWEEP_TIMEOUT)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        ending = done.stderr[-800:]
        raise RuntimeError(f"{' '.join(command[1:4])} exited {done.returncode}: {ending}")
    if out is not None:
        out.extend(done.stdout.splitlines())
    return wall


def _per_minute(rows: list[dict[str, Any]]) -> float:
    """Trials per minute from the first trial's start to the last one's end."""
    window = max(row["end"] for row in rows) - min(row["start"] for row in rows)
    return len(rows) / window * 60


def _median_trial(samples: list[dict[str, Any]]) -> str:
    durations = [row["end"] - row["start"] for sample in samples for row in sample["trials"]]
    return f"{statistics.median(durations):.2f} s"


def _median_wall(samples: list[dict[str, Any]]) -> str:
    return f"{statistics.median(sample['wall'] for sample in samples):.1f} s"
