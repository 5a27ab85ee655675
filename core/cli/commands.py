"""The commands: `train`, `sweep`, `lr-find`, `resume`, `fork`, `runs`, `export`, `delete`, `serve`,
and `stop`, `pause` and `set` to steer a run; each a function of the parsed arguments that
returns the exit status."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO, TypeVar

import numpy as np

from core.cli.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, UsageError, report
from core.cli.parser import given_changes, run_config
from core.cli.progress import ProgressBar, RunWatch, failure, format_summary
from core.cli.quiet import import_tensorflow_quietly
from core.cli.sweeping import run_sweep
from core.engine import Engine, RunConfig
from core.engine.checkpoints import RunCheckpoints
from core.engine.client import EngineClient
from core.engine.cluster import ClusterError, check_reachable
from core.engine.live import TASK_WEIGHT
from core.engine.lr_find import END as LR_FIND_END
from core.engine.lr_find import STEPS as LR_FIND_STEPS
from core.engine.lr_find import RangeTest, range_test_config
from core.engine.reading import saved_checkpoints
from core.engine.repeats import repeat_configs
from core.engine.workers import this_worker
from core.export import write_csv, write_tensorboard
from core.group_comparison import mean_interval
from core.knobs import InvalidInput
from core.store import (
    LR_FIND_ENDED_EVENT,
    RunRecord,
    Store,
    StoreError,
    UnknownRunError,
    canonical,
    default_location,
    is_url,
)
from core.store.paths import run_folder

T = TypeVar("T")

#: How long `stop`, `pause` and `set` wait for the run's process to carry them out: it
#: takes commands between two steps, so a step longer than this one times out.
STEER_SECONDS = 60.0
#: The final metrics that `train --repeats` sums up over its group.
FINAL_GROUP_KEYS = ("loss", "accuracy", "val_loss", "val_accuracy", "best_val_accuracy", "val_mae")


def train(args: argparse.Namespace) -> int:
    """Trains one run in an engine of its own, drawing its progress; Ctrl-C stops it.
    A worker of a multi-worker run other than the chief trains in step with the chief,
    which records the run (see `core.engine.workers`): its own copy goes to a store of
    its own that it deletes."""
    config = run_config(args)  # before the store: bad input writes nothing
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


def _train(args: argparse.Namespace, config: RunConfig) -> int:
    engine = open_engine(args, max_concurrent=1, must_exist=False)
    try:
        run_id = engine.start(config)
        print(run_id, flush=True)
        return _follow(engine, run_id)
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
            codes.append(_follow(engine, run_id))
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
        return _follow(engine, record.id)
    finally:
        engine.close()


def fork(args: argparse.Namespace) -> int:
    """Starts a fork of a run from one of its checkpoints in this process, drawing its
    progress (Ctrl-C stops it)."""
    changes = given_changes(args)
    engine = Engine(open_store(args.store, must_exist=True), max_concurrent=1)
    try:
        fork_id = engine.fork(args.run_id, args.step, **changes)
        print(fork_id, flush=True)
        return _follow(engine, fork_id)
    finally:
        engine.close()


def catalog(args: argparse.Namespace) -> int:
    """`catalog`: each model, dataset and optimizer with its description."""
    del args
    from core import data, models, optimizers

    sections = {
        "models": [(m.name, m.description, m.source) for m in models.catalog(plugins=True)],
        "datasets": [(d.name, d.description, d.source) for d in data.catalog(plugins=True)],
        "optimizers": [(o.name, o.summary, o.source) for o in optimizers.specs()],
    }
    for title, entries in sections.items():
        print(f"{title}:")
        width = max(len(name) for name, _, _ in entries)
        for name, description, source in entries:
            where = "" if source == "core" else f" [plugin: {Path(source).name}]"
            print(f"  {name:<{width}}  {description}{where}")
    return EXIT_OK


def steer(args: argparse.Namespace) -> int:
    """`stop`, `pause` or `set`: writes the command for the process that trains the run
    and waits until that process has carried it out (or refused it, saying why)."""
    with open_store(args.store, must_exist=True) as store:
        client = EngineClient(store)
        try:
            if args.command == "set":
                changes = given_changes(args)
                weights = changes.pop("task_weights", [])
                changes |= {f"{TASK_WEIGHT}{task}": weight for task, weight in weights}
                if not changes:
                    raise UsageError("set: give at least one knob, e.g. --lr 0.01")
                command = client.update(args.run_id, **changes)
            else:
                command = getattr(client, args.command)(args.run_id)
        except UnknownRunError:
            raise UsageError(f"run_id: no run {args.run_id!r} in {store.name}") from None
        done = client.settle(command, STEER_SECONDS)
        step = client.status(args.run_id).step
    if done.handled is None:
        report(f"the process that trains run {args.run_id} did not answer in {STEER_SECONDS:g} s")
        return EXIT_FAILED
    if done.error is not None:
        report(f"refused: {done.error}")
        return EXIT_FAILED
    what = ", ".join(f"{k} → {v}" for k, v in command.payload.get("knobs", {}).items())
    print(f"run {args.run_id}: {what or args.command} (taken at step {step})")
    return EXIT_OK


def _follow(engine: Engine, run_id: str, summary: TextIO | None = None) -> int:
    """Draws the run's progress until it ends (Ctrl-C stops it), prints its summary to
    `summary` (default: stdout), and returns the exit status."""
    watch = RunWatch(engine, run_id, ProgressBar(sys.stderr))
    try:
        status = watch.until_done()
        interrupted = False
    except KeyboardInterrupt:
        watch.bar.note(f"stopping run {run_id} (Ctrl-C)")
        with contextlib.suppress(InvalidInput):  # it may have just ended
            engine.stop(run_id)
        status = watch.until_done()
        interrupted = True
    print(format_summary(status), file=summary or sys.stdout, flush=True)
    if interrupted:
        return EXIT_INTERRUPTED
    if status.status == "completed":
        return EXIT_OK
    report(failure(status))
    return EXIT_FAILED


def serve(args: argparse.Namespace) -> int:
    """Serves the store: trains what clients hand over until told to stop (or idle)."""
    from core.engine.server import serve

    if not 1 <= args.max_concurrent <= 64:
        raise UsageError(f"max_concurrent: must be in [1, 64] (got {args.max_concurrent})")
    location = args.store or default_location()
    try:
        Store(location).close()  # a corrupt or foreign store is refused before anything starts
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    try:
        return serve(
            location,
            max_concurrent=args.max_concurrent,
            exit_when_idle=args.exit_when_idle,
            ray_address=args.ray_address,
        )
    except ClusterError as exc:
        raise UsageError(str(exc)) from None


def runs(args: argparse.Namespace) -> int:
    """Lists the store's runs, as a table or as JSON."""
    with open_store(args.store, must_exist=True) as store:
        records = store.list_runs()
        saved = {r.id: saved_checkpoints(store, r.id) for r in records}
        name = store.name
    if args.json:
        listed = [run_json(record, saved[record.id]) for record in records]
        print(json.dumps(listed, indent=2, allow_nan=False))
    elif records:
        print(format_runs(records))
    else:
        print(f"no runs in {name}", file=sys.stderr)
    return EXIT_OK


def run_json(record: RunRecord, saved: RunCheckpoints | None = None) -> dict[str, Any]:
    """A run for `runs --json`: `id`, `name`, `kind` (train, or lr_find for a
    learning-rate range test), `group` (the repeats it is one of, else null), `status`,
    `optimizer`, `model`, `dataset`, `created`, `started`, `finished` (ISO 8601, UTC, or
    null), `step`, `total_steps`, `final_metrics`, `error`, `config`, `parent` and
    `forked_at` (a fork's origin, else null), `node` (the machine or Ray node that trains
    it, null before it starts), and with its checkpoints `saved`, their steps
    (`checkpoints`) and size on disk (`checkpoint_bytes`); NaN and infinities become
    null."""
    checkpoints = saved.list() if saved is not None else []
    return _strict_json(
        {
            "id": record.id,
            "name": record.name,
            "kind": record.config.get("kind", "train"),
            "group": record.config.get("group"),
            "status": record.status,
            "optimizer": record.config.get("optimizer"),
            "model": record.config.get("model"),
            "dataset": record.config.get("dataset"),
            "created": _iso(record.created),
            "started": _iso(record.started),
            "finished": _iso(record.finished),
            "step": _step(record),
            "total_steps": record.total_steps,
            "final_metrics": record.final_metrics,
            "error": record.error,
            "config": record.config,
            "parent": record.parent,
            "forked_at": record.forked_at,
            "node": record.node,
            "checkpoints": [checkpoint.step for checkpoint in checkpoints],
            "checkpoint_bytes": sum(checkpoint.bytes for checkpoint in checkpoints),
        }
    )


def format_runs(records: Sequence[RunRecord]) -> str:
    """The runs as an aligned table: id, status, optimizer, step/total, val acc, created
    (local time) and name."""
    header = ("ID", "STATUS", "OPTIMIZER", "STEP", "VAL ACC", "CREATED", "NAME")
    rows = [header]
    for record in records:
        accuracy = (record.final_metrics or {}).get("val_accuracy")
        rows.append(
            (
                record.id,
                record.status,
                str(record.config.get("optimizer", "?")),
                f"{_step(record)}/{record.total_steps or '?'}",
                "-" if accuracy is None else f"{accuracy:.4f}",
                datetime.fromtimestamp(record.created).strftime("%Y-%m-%d %H:%M"),
                record.name,
            )
        )
    # Every column padded to its widest cell but the last, the name, which may be long.
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    return "\n".join(
        "  ".join([*(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)), row[-1]])
        for row in rows
    )


def export(args: argparse.Namespace) -> int:
    """Writes a run's metrics as CSV and/or TensorBoard event files."""
    if args.csv is None and args.tensorboard is None and args.model is None:
        raise UsageError("export: give --csv PATH, --tensorboard DIR or --model PATH.keras")
    with open_store(args.store, must_exist=True) as store:
        record = store.get_run(args.run_id)
        if record is None:
            raise UsageError(f"run_id: no run {args.run_id!r} in {store.name}")
        metrics = store.read_metrics(record.id)
        events = store.events(record.id)
    tensorboard = None
    if args.tensorboard is not None:  # the run id names a folder: checked before any write
        tensorboard = _writing("tensorboard", lambda: run_folder(args.tensorboard, record.id))
    if args.csv is not None:
        path = _writing("csv", lambda: write_csv(metrics, args.csv))
        print(f"wrote {path} ({len(metrics)} rows)")
    if tensorboard is not None:
        path = _writing(
            "tensorboard",
            lambda: write_tensorboard(metrics, tensorboard, events=events, config=record.config),
        )
        print(f"wrote {path}; view with: tensorboard --logdir {args.tensorboard}")
    if args.model is not None:
        from core.engine.model_file import save_model  # imports TensorFlow

        with open_store(args.store, must_exist=True) as store:
            saved = _writing(
                "model", lambda: save_model(store, record.id, args.model, args.checkpoint)
            )
        print(f"wrote {args.model} (the model at step {saved.step:,})")
    return EXIT_OK


def delete(args: argparse.Namespace) -> int:
    """Deletes ended runs with their metrics, events and checkpoints."""
    with open_store(args.store, must_exist=True) as store:
        client = EngineClient(store)
        for run_id in args.run_ids:
            freed = RunCheckpoints(store.checkpoint_folder(run_id)).size()
            client.delete(run_id)
            print(f"deleted {run_id} (checkpoints: {freed / 1e6:.1f} MB freed)")
    return EXIT_OK


def _writing(field: str, write: Callable[[], T]) -> T:
    """`write()`, with an output path that cannot be written reported as bad input."""
    try:
        return write()
    except OSError as exc:
        reason = f"cannot write {exc.filename}: {exc.strerror}" if exc.strerror else str(exc)
        raise UsageError(f"{field}: {reason}") from None
    except ValueError as exc:  # from run_folder, naming the field
        raise UsageError(str(exc)) from None


def open_engine(args: argparse.Namespace, *, max_concurrent: int, must_exist: bool) -> Engine:
    """An engine of the store `args.store`, on the Ray cluster `args.ray_address` if
    given; `UsageError` if either cannot be used (a cluster that does not answer, before
    the store is opened). Called once a command's input is checked, so TensorFlow, which
    the engine's runs load, is imported here (quietly) and not before a bad flag's error
    (6 s of waiting for one line) or a location that is no store's."""
    location = canonical(args.store or default_location())
    import_tensorflow_quietly()
    try:
        if args.ray_address:
            check_reachable(args.ray_address)
    except ClusterError as exc:
        raise UsageError(str(exc)) from None
    store = open_store(location, must_exist=must_exist)
    try:
        return Engine(store, max_concurrent=max_concurrent, ray_address=args.ray_address)
    except ClusterError as exc:
        store.close()
        raise UsageError(str(exc)) from None


def open_store(location: str | None, *, must_exist: bool) -> Store:
    """The store at `location`, a path or a URL (default: `default_location()`). With
    `must_exist`, a missing file is refused rather than created (a PostgreSQL database
    exists once it can be connected to). `UsageError` if it is missing or cannot be
    used; `LocationError` (bad input too) if `location` is no store's (see
    `core.store.canonical`)."""
    location = canonical(location or default_location())
    if must_exist and not is_url(location) and not Path(location).exists():
        raise UsageError(f"no store at {location}")
    try:
        return Store(location)
    except StoreError as exc:
        raise UsageError(str(exc)) from None


def _step(record: RunRecord) -> int:
    """The last step a run reached: its final count once ended, else the last flushed."""
    return max(record.step, int((record.final_metrics or {}).get("steps", 0)))


def _iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")


def _strict_json(value: Any) -> Any:
    """`value` with NaN and infinities replaced by None: strict JSON has neither."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: _strict_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_strict_json(item) for item in value]
    return value


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
        code = _follow(engine, run_id, summary=sys.stderr if args.json else None)
        curve = RangeTest.of(engine.store.read_metrics(run_id))
        ended = engine.store.events(run_id, LR_FIND_ENDED_EVENT)
    finally:
        engine.close()
    reason = ended[-1].payload["reason"] if ended else None
    if args.json:
        print(json.dumps(_strict_json(range_test_json(run_id, curve, reason))), flush=True)
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


def sweep(args: argparse.Namespace) -> int:
    """Runs or joins a hyperparameter sweep in an engine of its own (see `sweeping`)."""
    joins = not args.params  # a study to join is in a store that exists
    return run_sweep(
        lambda: open_engine(args, max_concurrent=args.parallel, must_exist=joins), args
    )


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "train": train,
    "sweep": sweep,
    "lr-find": lr_find,
    "catalog": catalog,
    "resume": resume,
    "fork": fork,
    "runs": runs,
    "export": export,
    "delete": delete,
    "serve": serve,
    "stop": steer,
    "pause": steer,
    "set": steer,
}
