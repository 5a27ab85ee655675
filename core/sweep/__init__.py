"""Hyperparameter sweeps: Optuna studies whose trials are runs of the lab's engine.

    >>> from core.sweep import Dimension, SearchSpace, Sweep
    >>> space = SearchSpace((Dimension("learning_rate", 1e-3, 1.0, log=True),))
    >>> sweep = Sweep(engine, base_config, space, n_trials=20, sampler="tpe", pruning=True)
    >>> sweep.start()                      # returns at once; a driver thread runs the trials
    >>> sweep.submit()                     # or: the engine process drives it (the dashboard's)
    >>> sweep.stop()                       # from any process: a command in the study
    >>> sweep.status().best_value          # the best objective value so far
    >>> sweep.results()                    # one row per trial, for a live table
    >>> engine.start(sweep.best_config())  # the base config with the best values

The study lives in the lab's store (its SQLite file or PostgreSQL database, beside the
runs) unless `storage` names another database, and keeps the sweep's plan:
`list_studies(engine)` lists past sweeps and `Sweep.load(engine, name)` reopens (and can
resume) one.

Modules: `space` (dimensions, checked against knobs), `objective` (what scores a trial,
and which way), `plan` (a sweep's storable definition), `trial_run` (one trial as one
run, and how each run's end is told), `driver` (the driver thread's loop), `control` (the
commands and driver records in a study, through which any process steers a sweep),
`hosting` (the engine process's drives, and its settling of the trials a killed
driver left), `samplers` (the Optuna sampler and pruner),
`studies` (storages and listing), `sweep` (the `Sweep` facade), `coordinates` (runs and trials as
rows of settings, for tables and parallel coordinates). Importing `core.sweep` imports
neither TensorFlow nor Optuna.
"""

from core.sweep.coordinates import numeric, parallel_rows, settings, varying
from core.sweep.plan import MAX_SEED, SAMPLERS, SweepPlan
from core.sweep.space import Axis, Dimension, SearchSpace, starting_dimension, sweepable_knobs
from core.sweep.studies import SweepSummary, list_studies, storage_url
from core.sweep.sweep import Sweep, SweepState, SweepStatus, TrialRow

__all__ = [
    "MAX_SEED",
    "SAMPLERS",
    "Axis",
    "Dimension",
    "SearchSpace",
    "Sweep",
    "SweepPlan",
    "SweepState",
    "SweepStatus",
    "SweepSummary",
    "TrialRow",
    "list_studies",
    "numeric",
    "parallel_rows",
    "settings",
    "starting_dimension",
    "storage_url",
    "sweepable_knobs",
    "varying",
]
