"""A sweep's study written straight into a lab's store, for the pages' analysis views:
Optuna's ask-and-tell with the plan's own distributions (the trials train nothing; their
values follow the learning rate, and those at the low end of its range are pruned); and
one with a trial its driver abandoned."""

from __future__ import annotations

import math
import socket
from typing import Any

import optuna

from core.engine import RunConfig
from core.sweep import Dimension, SearchSpace, SweepPlan
from core.sweep.objective import OBJECTIVE_ATTR
from core.sweep.studies import PLAN_ATTR, open_storage, storage_url
from core.sweep.trial_run import DRIVER, RUN_ID
from tests.lean import NO_INSTRUMENTS

BASE = RunConfig(
    dataset="digits", model="mlp", optimizer="sgd", max_steps=33, val_every=11, **NO_INSTRUMENTS
)
SPACE = SearchSpace(
    (
        Dimension("learning_rate", 1e-3, 1.0, log=True),
        Dimension("clip_norm", 0.1, 10.0, log=True),
        Dimension("batch_size", choices=(32, 64)),
    )
)
STEPS = (11, 22, 33)


def stored_study(
    engine: Any,
    name: str,
    n_trials: int = 16,
    seed: int = 0,
    written: int | None = None,
    pruning: bool = True,
) -> optuna.Study:
    """A random sweep `name` of `n_trials` in the store of `engine` (or a `Store`), as
    `Sweep.load` reads one, its first `written` trials (default: all) ended; a sweep with
    trials left can be resumed. A trial's accuracy rises with its learning rate's log
    (best at the top of the range: "widen it"), a little with its clip norm; with
    `pruning`, one below 0.005 is pruned."""
    plan = SweepPlan.create(
        BASE, SPACE, n_trials=n_trials, sampler="random", pruning=pruning, parallel=1, seed=seed
    )
    study = optuna.create_study(
        storage=open_storage(storage_url(engine)),
        study_name=name,
        direction=plan.objective.direction,
        sampler=optuna.samplers.RandomSampler(seed),
    )
    study.set_user_attr(PLAN_ATTR, plan.to_dict())
    study.set_user_attr(OBJECTIVE_ATTR, plan.objective.metric)
    distributions = {axis.name: axis.distribution() for axis in plan.axes}
    for _ in range(n_trials if written is None else written):
        trial = study.ask(distributions)
        rate, clip = trial.params["learning_rate"], trial.params["clip_norm"]
        final = 0.9 + 0.03 * math.log10(rate) + 0.005 * math.log10(clip)
        for step in STEPS:
            trial.report(final * step / STEPS[-1], step)
            if pruning and rate < 0.005 and step == STEPS[1]:
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                break
        else:
            study.tell(trial, final)
    return study


def abandoned_trial(engine: Any, name: str, run_id: str) -> optuna.Study:
    """`stored_study` `name` of three trials, two ended and the third left running by a
    driver whose process is gone, its run `run_id` (ended): a trial to settle."""
    study = stored_study(engine, name, n_trials=3, written=2)
    trial = study.ask()
    trial.set_user_attr(DRIVER, f"{socket.gethostname()}:{2**31 - 1}:0")  # no such process
    trial.set_user_attr(RUN_ID, run_id)
    return study
