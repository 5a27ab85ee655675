"""The commands that train in this process, showing progress: `train`, `lr-find`,
`resume` and `fork`; each one's parser beside its handler."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.cli.exits import EPILOG, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, UsageError, report
from core.cli.flags import (
    Common,
    Subparsers,
    add_run_flags,
    add_training_command,
    given_changes,
    run_config,
)
from core.cli.opening import open_engine, open_store
from core.cli.progress import follow
from core.cli.stored import strict_json
from core.cli.workers import this_worker
from core.engine import Engine, RunConfig
from core.engine.client import EngineClient
from core.engine.lr_find import END as LR_FIND_END
from core.engine.lr_find import STEPS as LR_FIND_STEPS
from core.engine.lr_find import RangeTest, range_test_config
from core.engine.repeats import VARY, repeat_configs
from core.group_comparison import mean_interval
from core.knobs import InvalidInput
from core.population.lineage import replay_config
from core.store import LR_FIND_ENDED_EVENT, RunRecord, UnknownRunError
from core.training.config import warnings as config_warnings

#: The final metrics that `train --repeats` sums up over its group.
FINAL_GROUP_KEYS = ("loss", "accuracy", "val_loss", "val_accuracy", "best_val_accuracy", "val_mae")


def add_train(commands: Subparsers, common: Common) -> None:
    """`train`, with the repeats' flags."""
    train_command = add_training_command(
        commands,
        common,
        "train",
        help="Train one run, showing its progress; Ctrl-C stops it.",
        description="Train one run: print its id, its progress on stderr, then its final\n"
        "metrics. Optimizer knobs not given keep the optimizer's own defaults.",
    )
    repeats = train_command.add_argument_group("repeats")
    repeats.add_argument(
        "--repeats",
        type=int,
        default=1,
        metavar="N",
        help="Train N runs of this config with seeds seed … seed+N−1, as one group "
        "(`runs --json` gives each its group), one after another; then print the mean "
        "and 95%% t-interval of each final metric over them. Default: 1.",
    )
    repeats.add_argument(
        "--vary",
        choices=VARY,
        default="both",
        help="What the repeats' seeds vary: both the initial weights and the batch order "
        "(default), or only one of them.",
    )
    train_command.add_argument(
        "--schedule-from",
        metavar="RUN",
        help="Replay RUN's knob schedule from scratch: the config of the first run of its "
        "lineage (a population's member, or any fork's first ancestor), with every knob "
        "change along the lineage made at its step, for as many steps as RUN trains; flags "
        "given override that config. Not with --config.",
    )
    train_command.set_defaults(command="train", handler=train)


def train(args: argparse.Namespace) -> int:
    """Trains one run in an engine of its own, drawing its progress; Ctrl-C stops it.
    A worker of a multi-worker run other than the chief trains in step with the chief,
    which records the run (see `core.cli.workers`): its own copy goes to a store of
    its own that it deletes."""
    config = run_config(args, _replayed(args))  # before the store: bad input writes nothing
    for warning in config_warnings(config):
        print(f"warning: {warning}", file=sys.stderr, flush=True)
    if args.repeats != 1:
        if config.strategy == "multiworker":
            raise UsageError("--repeats: a multi-worker run is trained once at a time")
        return _train_repeats(args, repeat_configs(config, args.repeats, args.vary))
    if config.strategy == "multiworker":
        try:
            worker = this_worker()
        except InvalidInput as exc:
            raise UsageError(str(exc)) from None
        if not worker.chief:
            print(f"{worker}: the chief records this run", file=sys.stderr, flush=True)
            with tempfile.TemporaryDirectory() as folder:
                unrecorded = argparse.Namespace(**vars(args))
                unrecorded.store = str(Path(folder) / "worker.sqlite")
                return _train(unrecorded, config)
    return _train(args, config)


def _replayed(args: argparse.Namespace) -> dict[str, Any] | None:
    """The config `--schedule-from RUN` replays (see `core.population.lineage`), read
    from the store, which must exist; None without the flag."""
    if args.schedule_from is None:
        return None
    if args.config is not None:
        raise UsageError("--schedule-from: give the replayed run or --config, not both")
    with open_store(args.store, must_exist=True) as store:
        try:
            return replay_config(EngineClient(store), args.schedule_from).to_dict()
        except UnknownRunError:
            raise UsageError(f"--schedule-from: no run {args.schedule_from} in the store") from None


def _train(args: argparse.Namespace, config: RunConfig) -> int:
    engine = open_engine(args, max_concurrent=1, must_exist=False)
    try:
        run_id = engine.start(config)
        print(run_id, flush=True)
        return follow(engine, run_id)
    finally:
        engine.close()


def _train_repeats(args: argparse.Namespace, configs: Sequence[RunConfig]) -> int:
    """Trains the repeats one after another, each with its progress (Ctrl-C stops the
    one training and those still queued), then prints the group's final metrics."""
    engine = open_engine(args, max_concurrent=1, must_exist=False)
    try:
        run_ids = [engine.start(config) for config in configs]
        print("\n".join(run_ids), flush=True)
        codes = []
        for run_id in run_ids:
            codes.append(follow(engine, run_id))
            if codes[-1] == EXIT_INTERRUPTED:
                for queued in run_ids[len(codes) :]:
                    with contextlib.suppress(InvalidInput):
                        engine.stop(queued)
                break
        records = [engine.store.get_run(run_id) for run_id in run_ids]
    finally:
        engine.close()
    print(format_group([r for r in records if r is not None]), flush=True)
    return max(codes, key=[EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED].index)


def format_group(records: Sequence[RunRecord]) -> str:
    """The group's final metrics: each one's mean and 95% t-interval over the runs that
    completed."""
    completed = [r for r in records if r.status == "completed" and r.final_metrics]
    group = records[0].config.get("group") if records else None
    lines = [f"group {group}: {len(completed)} of {len(records)} runs completed"]
    keys = [k for k in FINAL_GROUP_KEYS if all(k in r.final_metrics for r in completed)]
    for key in keys if completed else ():
        mean, margin = mean_interval([r.final_metrics[key] for r in completed])
        spread = "" if margin is None else f" ± {margin:.4g}"
        lines.append(f"  {key:<18} {mean:.6g}{spread}")
    if len(completed) > 1:
        lines.append("  (mean ± half the 95% t-interval over the runs)")
    return "\n".join(lines)


def add_lr_find(commands: Subparsers, common: Common) -> None:
    """`lr-find`."""
    command = add_training_command(
        commands,
        common,
        "lr-find",
        help="A learning-rate range test: the loss as the rate grows, and a suggested rate.",
        description="Run a learning-rate range test of the config the run flags give (Smith "
        "2017): the rate grows exponentially from --lr-find-start (default 1e-7) to "
        "--learning-rate (default 10) over --max-steps steps (default 200), ending early "
        "once the loss explodes. The test is kept as a run of kind lr_find, which the "
        "dashboard shows again. Prints the loss against the rate, then `suggested "
        "learning_rate: VALUE` last: the rate where the smoothed log-loss falls fastest.",
    )
    command.add_argument(
        "--json",
        action="store_true",
        help="Print one JSON object instead: the run id, each step's rate, loss and "
        "smoothed loss, why the test ended, and the suggestion (null when there is none).",
    )
    command.set_defaults(command="lr-find", handler=lr_find)


def lr_find(args: argparse.Namespace) -> int:
    """Runs a learning-rate range test of the run flags' config in an engine of its own,
    drawing its progress; prints its curve and, last, the suggested rate (or all of it as
    JSON). Fails when the curve gives no suggestion."""
    config = run_config(args)
    test = range_test_config(
        config,
        steps=config.max_steps or LR_FIND_STEPS,
        start=config.lr_find_start,
        end=given_changes(args).get("learning_rate", LR_FIND_END),
    )
    engine = open_engine(args, max_concurrent=1, must_exist=False)
    try:
        run_id = engine.start(test)
        if not args.json:
            print(run_id, flush=True)
        code = follow(engine, run_id, summary=sys.stderr if args.json else None)
        curve = RangeTest.of(engine.store.read_metrics(run_id))
        ended = engine.store.events(run_id, LR_FIND_ENDED_EVENT)
    finally:
        engine.close()
    reason = ended[-1].payload["reason"] if ended else None
    if args.json:
        print(json.dumps(strict_json(range_test_json(run_id, curve, reason))), flush=True)
    else:
        print(format_range_test(curve, reason), flush=True)
    if code == EXIT_OK and curve.suggestion is None:
        report(f"run {run_id}: no suggestion: the loss never fell over the range")
        return EXIT_FAILED
    return code


def range_test_json(run_id: str, curve: RangeTest, reason: str | None) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "learning_rate": curve.rates.tolist(),
        "loss": curve.losses.tolist(),
        "smoothed_loss": curve.smoothed.tolist(),
        "ended_early": reason,
        "suggested_learning_rate": curve.suggestion,
    }


def format_range_test(curve: RangeTest, reason: str | None, rows: int = 12) -> str:
    """The curve as a few rows of rate and smoothed loss, why it ended early, and the
    suggestion last."""
    lines = [f"{'learning_rate':>14}  {'loss (smoothed)':>15}"]
    shown = (
        set(np.linspace(0, len(curve.rates) - 1, rows).astype(int)) if len(curve.rates) else set()
    )
    if curve.suggested_at is not None:
        shown.add(curve.suggested_at)
    for i in sorted(shown):
        mark = "  <- suggested" if i == curve.suggested_at else ""
        lines.append(f"{curve.rates[i]:>14.3g}  {curve.smoothed[i]:>15.4g}{mark}")
    if reason:
        lines.append(f"ended early: {reason}")
    suggestion = "none" if curve.suggestion is None else f"{curve.suggestion:.3g}"
    lines.append(f"suggested learning_rate: {suggestion}")
    return "\n".join(lines)


def add_resume(commands: Subparsers, common: Common) -> None:
    """`resume`."""
    command = commands.add_parser(
        "resume",
        parents=[common.store],
        help="Continue a stopped or interrupted run from its last checkpoint (or unpause "
        "a paused one).",
        description="Continue a stopped or interrupted run from its last checkpoint, in "
        "this process and under the same id, showing its progress; the metrics it logged "
        "after that checkpoint are replaced. A paused run whose process lives is unpaused.",
    )
    command.add_argument("run_id", metavar="RUN_ID", help="The run, as `runs` lists it.")
    command.set_defaults(command="resume", handler=resume)


def resume(args: argparse.Namespace) -> int:
    """Continues a stopped or interrupted run from its last checkpoint in this process,
    drawing its progress (Ctrl-C stops it again); unpauses a paused run whose process
    lives."""
    store = open_store(args.store, must_exist=True)
    alive = store.liveness()
    record = store.get_run(args.run_id, alive=alive)
    if record is None:
        store.close()
        raise UsageError(f"run_id: no run {args.run_id!r} in {store.name}")
    if record.active and alive(record.owner):
        with store:
            if record.status != "paused":
                raise UsageError(f"run_id: run {record.id} is {record.status}, not paused")
            store.add_command(record.id, "resume")
        print(f"asked the process that trains run {record.id} to unpause it")
        return EXIT_OK
    engine = Engine(store, max_concurrent=1)  # marks it interrupted if its process died
    try:
        engine.resume(record.id)
        print(record.id, flush=True)
        return follow(engine, record.id)
    finally:
        engine.close()


def add_fork(commands: Subparsers, common: Common) -> None:
    """`fork`, with the run flags it may change."""
    command = commands.add_parser(
        "fork",
        parents=[common.store],
        help="Start a new run from a checkpoint of another, with knobs or run fields changed.",
        description="Start a new run (a fork) from the checkpoint of step N of RUN_ID, with "
        "the live knobs and run fields given changed (name, max-steps, epochs, log-every, "
        "val-every, checkpoint-every; what the checkpoint holds cannot change: clone the "
        "run for that), and train it here, showing its progress.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument("run_id", metavar="RUN_ID", help="The run to fork, as `runs` lists it.")
    command.add_argument(
        "--step",
        type=int,
        required=True,
        metavar="N",
        help="The checkpoint to start from (the run's checkpoints are listed by `runs "
        "--json`, under `checkpoints`).",
    )
    add_run_flags(command, common)
    command.set_defaults(command="fork", handler=fork)


def fork(args: argparse.Namespace) -> int:
    """Starts a fork of a run from one of its checkpoints in this process, drawing its
    progress (Ctrl-C stops it)."""
    changes = given_changes(args)
    engine = Engine(open_store(args.store, must_exist=True), max_concurrent=1)
    try:
        fork_id = engine.fork(args.run_id, args.step, **changes)
        print(fork_id, flush=True)
        return follow(engine, fork_id)
    finally:
        engine.close()
