"""The commands on the runs a store holds: `delete`, `runs`, `export` and `landscape`;
each one's parser beside its handler."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from core.cli.exits import EXIT_OK, UsageError
from core.cli.flags import Common, Subparsers
from core.cli.opening import open_store
from core.engine.checkpoints import RunCheckpoints
from core.engine.client import EngineClient
from core.engine.reading import saved_checkpoints
from core.export import write_csv, write_tensorboard
from core.store import RunRecord, Store
from core.store.paths import run_folder

T = TypeVar("T")


def add_delete(commands: Subparsers, common: Common) -> None:
    """`delete`."""
    command = commands.add_parser(
        "delete",
        parents=[common.store],
        help="Delete ended runs with their metrics and checkpoints.",
        description="Delete ended runs with their metrics, events and checkpoints.",
    )
    command.add_argument("run_ids", nargs="+", metavar="RUN_ID", help="The runs to delete.")
    command.set_defaults(command="delete", handler=delete)


def delete(args: argparse.Namespace) -> int:
    """Deletes ended runs with their metrics, events and checkpoints."""
    with open_store(args.store, must_exist=True) as store:
        client = EngineClient(store)
        for run_id in args.run_ids:
            freed = RunCheckpoints(store.checkpoint_folder(run_id)).size()
            client.delete(run_id)
            print(f"deleted {run_id} (checkpoints: {freed / 1e6:.1f} MB freed)")
    return EXIT_OK


def add_runs(commands: Subparsers, common: Common) -> None:
    """`runs`."""
    command = commands.add_parser(
        "runs",
        parents=[common.store],
        help="List the runs in the store, newest first.",
        description="List the runs in the store, newest first.",
    )
    command.add_argument(
        "--json",
        action="store_true",
        help="Print a JSON list, one object per run (times as ISO 8601 in UTC; NaN and "
        "infinities as null).",
    )
    command.set_defaults(command="runs", handler=runs)


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
    return strict_json(
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


def add_export(commands: Subparsers, common: Common) -> None:
    """`export`."""
    command = commands.add_parser(
        "export",
        parents=[common.store],
        help="Export a run's metrics as CSV and/or TensorBoard event files, or its model.",
        description="Export a run's metrics: a CSV table, and/or TensorBoard event files "
        "in DIR/RUN_ID (so that `tensorboard --logdir DIR` lists every exported run); "
        "and/or its trained model, from one of its checkpoints, as a .keras file.",
    )
    command.add_argument("run_id", metavar="RUN_ID", help="The run, as `runs` lists it.")
    command.add_argument("--csv", type=Path, metavar="PATH", help="Write the CSV table here.")
    command.add_argument(
        "--tensorboard", type=Path, metavar="DIR", help="Write event files in DIR/RUN_ID."
    )
    command.add_argument(
        "--model",
        type=Path,
        metavar="PATH.keras",
        help="Write the trained model, with its optimizer, as a Keras file; load it with "
        "core.optimizers.load_model(PATH) and predict or train on.",
    )
    command.add_argument(
        "--checkpoint",
        default="last",
        metavar="{last,best,STEP}",
        help="The checkpoint --model takes: the last (default), the best validated, or the "
        "one of a step.",
    )
    command.set_defaults(command="export", handler=export)


def export(args: argparse.Namespace) -> int:
    """Writes a run's metrics as CSV and/or TensorBoard event files."""
    if args.csv is None and args.tensorboard is None and args.model is None:
        raise UsageError("export: give --csv PATH, --tensorboard DIR or --model PATH.keras")
    with open_store(args.store, must_exist=True) as store:
        record = stored_run(store, args.run_id)
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


def add_landscape(commands: Subparsers, common: Common) -> None:
    """`landscape`."""
    command = commands.add_parser(
        "landscape",
        parents=[common.store],
        help="Compute (or read) the loss landscape around one of a run's checkpoints.",
        description="The loss around a run's checkpoint: along the update the optimizer "
        "takes from it, along a random direction, and over a plane of two random directions "
        "(filter-normalized, on one batch). Computed the first time and kept beside the "
        "checkpoint, where Live reads it; prints the loss at the centre and the file.",
    )
    command.add_argument("run_id", metavar="RUN_ID", help="The run, as `runs` lists it.")
    command.add_argument(
        "--step",
        type=int,
        metavar="STEP",
        help="The checkpoint's step (default: the run's last checkpoint); `runs --json` lists "
        "each run's checkpoints.",
    )
    command.set_defaults(command="landscape", handler=landscape)


def landscape(args: argparse.Namespace) -> int:
    """Computes (or reads) a checkpoint's loss landscape; prints its centre and where it
    is kept."""
    from core.engine.landscape import kept_landscape, landscape_path  # imports TensorFlow

    with open_store(args.store, must_exist=True) as store:
        record = stored_run(store, args.run_id)
        step = args.step
        if step is None:
            last = RunCheckpoints(store.checkpoint_folder(record.id)).last()
            if last is None:
                raise UsageError(f"step: run {record.id} has no checkpoint")
            step = last.step
        kept = kept_landscape(store, record.id, step)
        path = landscape_path(store, record.id, step)
    print(f"loss at the centre (step {step:,}): {kept.centre:.6g}")
    for what, losses in (
        ("along the update", kept.along_update),
        ("along a random direction", kept.along_random),
        ("over the plane", kept.surface),
    ):
        print(f"{what}: from {losses.min():.6g} to {losses.max():.6g}")
    print(f"kept at {path}")
    return EXIT_OK


def stored_run(store: Store, run_id: str) -> RunRecord:
    """The run `run_id` of `store`; `UsageError` naming `run_id` when it has none."""
    record = store.get_run(run_id)
    if record is None:
        raise UsageError(f"run_id: no run {run_id!r} in {store.name}")
    return record


def _writing(field: str, write: Callable[[], T]) -> T:
    """`write()`, with an output path that cannot be written reported as bad input."""
    try:
        return write()
    except OSError as exc:
        reason = f"cannot write {exc.filename}: {exc.strerror}" if exc.strerror else str(exc)
        raise UsageError(f"{field}: {reason}") from None
    except ValueError as exc:  # from run_folder, naming the field
        raise UsageError(str(exc)) from None


def _step(record: RunRecord) -> int:
    """The last step a run reached: its final count once ended, else the last flushed."""
    return max(record.step, int((record.final_metrics or {}).get("steps", 0)))


def _iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")


def strict_json(value: Any) -> Any:
    """`value` with NaN and infinities replaced by None: strict JSON has neither."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: strict_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(item) for item in value]
    return value
