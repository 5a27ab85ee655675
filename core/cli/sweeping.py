"""`sweep`: a hyperparameter search from the command line, its trials drawn as a table.

    optlab sweep --param learning_rate=1e-4:1e-1:log --param clip_norm=0.1,1,10 \\
        --trials 20 --sampler tpe --optimizer adamw --max-steps 300

The study lives in the lab's store, so that a sweep started on one machine is joined from
another with `--study NAME` alone (the study's own plan applies; Optuna's parallel mode
shares the budget) and the dashboard's Sweep page shows it live.

The sweep is driven here, in this process, whose engine trains its trials: it needs no
engine process, its table prints as trials end, and Ctrl-C stops it. It reads its study's
command each round as the engine's drivers do (see `core.sweep.control`), so that the
Sweep page's Stop, a command written to the study, stops it too.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from core.cli.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, UsageError, report
from core.cli.flags import Common, Subparsers, add_training_command, is_number, run_config
from core.cli.opening import open_engine, open_store
from core.knobs import InvalidInput
from core.sweep import MAX_SEED, SAMPLERS, SearchSpace, Sweep, SweepPlan, list_studies
from core.sweep.analysis import importance_lines, importances, load_study, summary_lines
from core.sweep.objective import OBJECTIVE_NAMES, TIME_TO_TARGET
from core.sweep.plan import MAX_PARALLEL

if TYPE_CHECKING:
    from core.engine import Engine
    from core.sweep import SweepStatus, TrialRow
    from core.sweep.analysis import Importances
    from core.sweep.objective import Objective

#: Seconds between two looks at the trials.
POLL_SECONDS = 0.5

#: A trial's states before it ends: printed once its run starts (see `TrialTable`).
UNSTARTED = ("WAITING", "RUNNING")
#: `--param` forms, for help and errors.
PARAM_FORMS = "NAME=LOW:HIGH[:log][:POINTS] or NAME=A,B,..."


def add_sweep(commands: Subparsers, common: Common) -> None:
    """`sweep`, with the search's flags."""
    command = add_training_command(
        commands,
        common,
        "sweep",
        help="Search hyperparameters: trials that are runs, drawn as a live table.",
        description="Run an Optuna study whose trials are runs of the config the run flags "
        "give, varying each --param; print each trial as it starts and ends, then the best. "
        "The study lives in the store: `--study NAME` alone joins a study (from another "
        "machine on a shared store, or a stopped one), and the dashboard's Sweep page shows "
        "it live. Ctrl-C stops the sweep and its runs.",
    )
    search = command.add_argument_group("search")
    search.add_argument(
        "--param",
        dest="params",
        action="append",
        default=[],
        metavar="SPEC",
        help="A setting to vary, a run field or a knob of the optimizer: a range "
        "NAME=LOW:HIGH (NAME=LOW:HIGH:log on a log scale; a last :POINTS sets its grid "
        "points, default 5) or choices NAME=A,B,C. Repeat for each.",
    )
    search.add_argument(
        "--trials",
        dest="n_trials",
        type=int,
        metavar="N",
        help="How many trials; default (grid only): every grid point.",
    )
    search.add_argument("--sampler", choices=SAMPLERS, default="tpe", help="Default: tpe.")
    search.add_argument(
        "--parallel", type=int, default=2, metavar="P", help="Trials that train at once (2)."
    )
    search.add_argument(
        "--repeats",
        type=int,
        default=1,
        metavar="N",
        help="Runs per trial, over seeds seed … seed+N−1: a trial's value is their mean "
        "(with its 95%% t-interval in the table), and pruning compares means. Default: 1.",
    )
    search.add_argument(
        "--pruning",
        action="store_true",
        help="Stop trials whose objective value trails the others' at the same step.",
    )
    search.add_argument(
        "--objective",
        choices=OBJECTIVE_NAMES,
        help="What scores a trial: val_accuracy (maximized), val_loss, val_mae (a "
        f"regression's) or {TIME_TO_TARGET} (minimized: the steps a run took to reach "
        "--target). Default: the dataset's metric, val_accuracy or a regression's val_mae.",
    )
    search.add_argument(
        "--target",
        type=float,
        metavar="VALUE",
        help=f"For {TIME_TO_TARGET}: the validation accuracy to reach (at least), or a "
        "regression's validation MAE (at most).",
    )
    search.add_argument(
        "--study",
        metavar="NAME",
        help="The study's name (default: made from the time); if the store has it, join it.",
    )
    search.add_argument(
        "--report",
        action="store_true",
        help="With --study NAME alone: print the study's summary (its best, the knobs that "
        "matter, where the best quarter of trials lie, ranges to widen) and each knob's "
        "importance, and run nothing.",
    )
    search.add_argument(
        "--sampler-seed",
        type=int,
        metavar="S",
        help="The sampler's seed (default: a random one); give each joining machine its own.",
    )
    command.set_defaults(command="sweep", handler=sweep)


def sweep(args: argparse.Namespace) -> int:
    """Runs or joins a hyperparameter sweep in an engine of its own (see `run_sweep`)."""
    joins = not args.params  # a study to join is in a store that exists
    return run_sweep(
        lambda: open_engine(args, max_concurrent=args.parallel, must_exist=joins), args
    )


def parse_params(texts: Sequence[str]) -> SearchSpace:
    """The search space of `--param` values: `NAME=LOW:HIGH` ranges (`:log` for log
    scale, then the grid points for `--sampler grid`) or `NAME=A,B,C` choices. Raises
    `UsageError` naming `param` for a malformed value; the names and ranges are checked
    against the optimizer's knobs when the sweep is made."""
    rows = []
    for text in texts:
        name, equals, value = text.partition("=")
        if not equals or not name or not value:
            raise UsageError(f"param: {text!r} is not {PARAM_FORMS}")
        if "," in value or ":" not in value:
            rows.append({"name": name, "choices": value})
            continue
        low, high, *rest = value.split(":")
        log = bool(rest) and rest[0] == "log"
        points = rest[1:] if log else rest
        if len(points) > 1 or not all(is_number(p) for p in (low, high, *points)):
            raise UsageError(f"param: {text!r} is not {PARAM_FORMS}")
        rows.append(
            {
                "name": name,
                "low": low,
                "high": high,
                "log": log,
                "points": points[0] if points else None,
            }
        )
    return SearchSpace.from_rows(rows)


def run_sweep(open_engine: Callable[[], Engine], args: argparse.Namespace) -> int:
    """Runs the sweep `args` describe, or joins the study `--study` names when no
    `--param` is given, in the engine `open_engine` makes: a new sweep is checked before
    that, so bad input writes nothing. Prints each trial as it starts and ends, then the
    best, then each knob's importance; Ctrl-C stops it (its stopped trials run again if
    it is joined later). With `--report`, prints a stored study's summary instead (see
    `report_study`). Returns the exit status."""
    if args.report:
        return report_study(args, sys.stdout)
    if not 1 <= args.parallel <= MAX_PARALLEL:
        raise UsageError(f"parallel: must be in [1, {MAX_PARALLEL}] (got {args.parallel})")
    if args.params:
        config, space = run_config(args), parse_params(args.params)
        settings = _settings(args)
        SweepPlan.create(config, space, **settings)  # raises InvalidInput naming each field
    elif args.study is None:
        raise UsageError(f"param: give at least one --param {PARAM_FORMS}, or --study NAME")
    import optuna

    # Optuna's own info lines ("A new study created...") would break into the table.
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    engine = open_engine()
    try:
        if args.params:
            search = Sweep(engine, config, space, study_name=args.study, **settings)
        else:
            search = _joined(engine, args)
        search.start()
        print(f"sweep {search.study_name}: {search.plan.n_trials} trials", flush=True)
        print(
            f"a trial's value: {search.plan.objective.value_text(search.plan.repeats)}", flush=True
        )
        return _follow(search, sys.stdout)
    finally:
        engine.close()


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "n_trials": args.n_trials,
        "sampler": args.sampler,
        "pruning": args.pruning,
        "parallel": args.parallel,
        "repeats": args.repeats,
        "objective": args.objective,
        "target": args.target,
        "seed": secrets.randbelow(MAX_SEED + 1) if args.sampler_seed is None else args.sampler_seed,
    }


def _joined(engine: Engine, args: argparse.Namespace) -> Sweep:
    """The sweep of the study `--study` names, with its own plan (the one it was made
    with), `--trials` and `--parallel` given here; `UsageError` if there is none."""
    if args.study not in {summary.study_name for summary in list_studies(engine)}:
        raise UsageError(
            f"study: no study {args.study!r} in {engine.store.name} to join; give --param "
            "to start one"
        )
    return Sweep.load(engine, args.study, n_trials=args.n_trials, parallel=args.parallel)


def _follow(search: Sweep, out: TextIO) -> int:
    """Prints each trial when it starts and ends until the sweep is over, then its
    importances; the exit status: 0 when its budget is spent, 1 if it failed or no trial
    completed, 130 after Ctrl-C (which stops it) or a stop asked through the store (the
    Sweep page's). The analysis never decides it: its failure is reported, and the
    trials, which ran, keep their values in the study."""
    table = TrialTable(search.plan.space.dimensions, out)
    interrupted = False
    while True:
        try:
            table.update(search.results())
            if not search.active:
                break
            time.sleep(POLL_SECONDS)
        except KeyboardInterrupt:
            print(f"stopping sweep {search.study_name} (Ctrl-C)", file=sys.stderr, flush=True)
            search.stop()
            interrupted = True
    status = search.wait()
    table.update(search.results())
    print(summary(status, search.plan.objective), file=out, flush=True)
    if search.study is not None:
        try:
            print_importances(importances(search.study), out)
        except Exception as exc:  # advice on a sweep that ran: it cannot fail the sweep
            report(f"sweep {status.study_name}: its importances failed: {exc!r}")
    if interrupted:
        return EXIT_INTERRUPTED
    if status.state == "stopped":
        report(f"sweep {status.study_name} was stopped from another process (the Sweep page)")
        return EXIT_INTERRUPTED
    if status.state == "failed":
        report(f"sweep {status.study_name} failed: {status.error}")
        return EXIT_FAILED
    if status.best_value is None:
        report(f"sweep {status.study_name}: no trial completed")
        return EXIT_FAILED
    return EXIT_OK


class TrialTable:
    """Trials as aligned rows, one printed each time a started trial's state changes.

    A trial starts once its run does: asked for, it is RUNNING before its values are
    drawn and its run started (a sweep of two at once printed two RUNNING rows without
    values), and an enqueued one (a resumed sweep's retry) WAITING holds none yet.
    """

    def __init__(self, dimensions: Sequence[Any], out: TextIO) -> None:
        self.names = [dimension.name for dimension in dimensions]
        self.out = out
        self._seen: dict[int, str] = {}  # trial number -> the state last printed
        self._widths = [5, 8, 17, *(max(len(n), 10) for n in self.names), 13]
        self._print(("trial", "state", "value", *self.names, "run"))

    def update(self, rows: Sequence[TrialRow]) -> None:
        for row in rows:
            if row.state in UNSTARTED and row.run_id is None:
                continue  # printed once its run starts, with its values
            if self._seen.get(row.number) != row.state:
                self._seen[row.number] = row.state
                value = "" if row.value is None else f"{row.value:.4f}"
                if row.spread is not None:
                    value += f" ± {row.spread:.4f}"
                params = (_shown(row.params.get(name)) for name in self.names)
                self._print((str(row.number), row.state, value, *params, row.run_id or ""))

    def _print(self, cells: Sequence[str]) -> None:
        line = "  ".join(cell.ljust(width) for cell, width in zip(cells, self._widths, strict=True))
        print(line.rstrip(), file=self.out, flush=True)


def summary(status: SweepStatus, objective: Objective) -> str:
    """The last lines: how the trials ended, then the best trial's value and settings."""
    head = (
        f"sweep {status.study_name} {status.state}: {status.finished}/{status.n_trials} "
        f"trials finished ({status.pruned} pruned, {status.failed} failed)"
    )
    if status.best_value is None:
        return head
    settings = " ".join(f"{k}={_shown(v)}" for k, v in (status.best_params or {}).items())
    return (
        f"{head}\nbest {objective.label}: {status.best_value:.4f} (trial {status.best_trial}, run "
        f"{status.best_run_id}) {settings}"
    )


def _shown(value: Any) -> str:
    return "" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def print_importances(found: Importances, out: TextIO) -> None:
    """Prints how `found` was found (`importances: PED-ANOVA, Optuna's default
    evaluator, on all 12 trials; 90% intervals over …`), then a line per knob, highest
    first: `importance NAME VALUE [LOW, HIGH]` (the evaluator's on all trials, and the
    interval over the resamples). None told (too few trials, or no variance): a note on
    stderr saying why."""
    if not found.knobs:
        print(f"importance: {found.untold}", file=sys.stderr, flush=True)
        return
    print(f"importances: {found.describe()}", file=out, flush=True)
    for line in importance_lines(found):
        print(line, file=out, flush=True)


def report_study(args: argparse.Namespace, out: TextIO) -> int:
    """`--report`: prints the written summary of the study `--study` names in the store,
    then its importances (`print_importances`); runs nothing. `UsageError` naming
    `report` with `--param`, naming `study` without `--study`, for a study the store
    does not hold, or for one of several objectives."""
    if args.params:
        raise UsageError("report: reads a stored study: give --study NAME without --param")
    if args.study is None:
        raise UsageError("study: --report needs --study NAME, a study in the store")
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with open_store(args.store, must_exist=True) as store:
        try:
            study = load_study(store, args.study)
        except InvalidInput:
            raise UsageError(f"study: no study {args.study!r} in {store.name}") from None
        if len(study.directions) != 1:
            raise UsageError(f"study: {args.study!r} has several objectives: no one best")
        found = importances(study)
        for line in summary_lines(study, found):
            print(line, file=out, flush=True)
        print_importances(found, out)
    return EXIT_OK
