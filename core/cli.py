"""`python -m core`: train runs, list them and export their metrics from a terminal.

    python -m core train --optimizer projected_gd --radius 5 --lr 0.1 --epochs 2
    python -m core runs [--json]
    python -m core export RUN_ID --csv run.csv --tensorboard tb/

Every command takes `--store PATH` (default: `$OPTLAB_STORE`, else `runs/optlab.sqlite`).
`train` has a flag for every run field (`core.engine.FIELDS`) and for every knob of every
registered optimizer, plugins included, with the knob's help and range; values are checked
by the same validation as the dashboard's, which names each bad field.

Exit status (`EXIT_*`):
    0    done; for `train`, the run completed
    1    the run diverged or failed, or the store failed while in use
    2    bad input: a bad flag or config, a missing or malformed `--config` file, an
         unknown run, an output path that cannot be written, no store or a corrupt one;
         `train` has then written nothing (no store file, no run), and `runs` and
         `export` never create a store
    130  interrupted by Ctrl-C; `train` first stops its run (status `stopped`)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from core import optimizers
from core.engine import FIELDS, Engine, RunConfig, RunStatus, fields
from core.engine.execution import FINAL_KEYS
from core.export import safe_path, write_csv, write_tensorboard
from core.knobs import InvalidHyperparameters, Knob, read_number
from core.optimizers import catalog
from core.optimizers.catalog import OptimizerSpec
from core.store import RunRecord, Store, StoreError, default_path

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C

POLL_SECONDS = 0.5  # progress redraws about twice a second
DEFAULT_MAX_CONCURRENT = 3  # the demo race's three runs train at once
HYPERPARAMETER = "hyperparameters."  # argparse dest prefix of optimizer knobs
SUMMARY_KEYS = (*FINAL_KEYS, "best_val_accuracy")
RUN_FIELDS = frozenset(knob.name for knob in FIELDS)

EPILOG = """exit status:
  0    done; for train, the run completed
  1    the run diverged or failed
  2    bad input (flags, config, --config file, unknown run, missing or corrupt store);
       train then writes nothing
  130  Ctrl-C; train stops its run first
"""


class UsageError(Exception):
    """Bad input: reported as one `error: field: reason` line, with exit status 2."""


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line on `argv` (default: `sys.argv[1:]`); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    plugins = _needs_plugins(argv)
    trains = "train" in argv and not {"-h", "--help"} & set(argv)
    if (plugins or trains) and "TF_CPP_MIN_LOG_LEVEL" not in os.environ:
        _import_tensorflow_quietly()
    specs = optimizers.specs() if plugins else list(catalog.BUILTIN)
    if plugins:
        for path, reason in catalog.plugin_errors().items():
            print(f"warning: plugin {path} was not loaded: {reason}", file=sys.stderr)
    parser = build_parser(specs)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed the help, or the usage and the error
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        return args.handler(args)
    except (UsageError, InvalidHyperparameters) as exc:
        _error(str(exc).replace("\n", " "))
        return EXIT_USAGE
    except StoreError as exc:
        _error(str(exc))
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader left (`runs --json | head`): nothing more to say, and no traceback.
        # Python would still try to flush stdout at exit: point it at /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


def _import_tensorflow_quietly() -> None:
    """Imports TensorFlow and finds its devices with the native start-up lines (oneDNN,
    CPU features, CUDA probing: written to file descriptor 2 before any logging setting
    applies) kept off the terminal. Python's own errors still show. Setting
    `TF_CPP_MIN_LOG_LEVEL` leaves TensorFlow's output to it."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        import tensorflow as tf

        tf.config.list_physical_devices()
    finally:
        os.dup2(saved, 2)
        os.close(saved)


# The parser ------------------------------------------------------------------------------


def _needs_plugins(argv: Sequence[str]) -> bool:
    """Whether `train` may need a plugin optimizer's flags: it names an optimizer that is
    not built in, or takes a `--config` file (which may). Loading plugins imports
    TensorFlow, which `--help` and the other commands do without."""
    if "train" not in argv:
        return False
    for i, arg in enumerate(argv):
        name = arg.partition("=")[2] if arg.startswith("--optimizer=") else None
        if arg == "--optimizer" and i + 1 < len(argv):
            name = argv[i + 1]
        if (
            arg == "--config"
            or arg.startswith("--config=")
            or (name is not None and name not in catalog.BUILTIN_NAMES)
        ):
            return True
    return False


def build_parser(specs: Sequence[OptimizerSpec] | None = None) -> argparse.ArgumentParser:
    """The `python -m core` parser, with `train` flags for the knobs of `specs` (default:
    every optimizer, plugins included); each command's handler is its `handler` default."""
    specs = optimizers.specs() if specs is None else specs
    parser = argparse.ArgumentParser(
        prog="optlab" if Path(sys.argv[0]).name == "optlab" else "python -m core",
        description="Optimizer Lab from the command line: train runs, list them, export them.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument(
        "--store",
        type=Path,
        metavar="PATH",
        help="The store file (default: $OPTLAB_STORE, else runs/optlab.sqlite).",
    )

    train = commands.add_parser(
        "train",
        parents=[store],
        help="Train one run, showing its progress; Ctrl-C stops it.",
        description="Train one run: print its id, its progress on stderr, then its final\n"
        "metrics. Optimizer knobs not given keep the optimizer's own defaults.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_train_arguments(train, specs)
    train.set_defaults(handler=_train)

    runs = commands.add_parser(
        "runs",
        parents=[store],
        help="List the runs in the store, newest first.",
        description="List the runs in the store, newest first.",
    )
    runs.add_argument(
        "--json",
        action="store_true",
        help="Print a JSON list, one object per run (times as ISO 8601 in UTC; NaN and "
        "infinities as null).",
    )
    runs.set_defaults(handler=_runs)

    export = commands.add_parser(
        "export",
        parents=[store],
        help="Export a run's metrics as CSV and/or TensorBoard event files.",
        description="Export a run's metrics: a CSV table, and/or TensorBoard event files "
        "in DIR/RUN_ID (so that `tensorboard --logdir DIR` lists every exported run).",
    )
    export.add_argument("run_id", metavar="RUN_ID", help="The run, as `runs` lists it.")
    export.add_argument("--csv", type=Path, metavar="PATH", help="Write the CSV table here.")
    export.add_argument(
        "--tensorboard", type=Path, metavar="DIR", help="Write event files in DIR/RUN_ID."
    )
    export.set_defaults(handler=_export)

    serve = commands.add_parser(
        "serve",
        parents=[store],
        help="Train the runs the dashboard starts, in this process (the dashboard launches "
        "one when none serves the store).",
        description="Serve the store: train the runs that the dashboard (or any client) "
        "hands over, and carry out the commands written for them. One engine serves a "
        "store at a time; a second exits at once. Ctrl-C or SIGTERM interrupts what "
        "still trains.",
    )
    serve.add_argument(
        "--max-concurrent",
        type=int,
        default=DEFAULT_MAX_CONCURRENT,
        metavar="N",
        help=f"Runs that train at once; the rest wait in a queue. Default: "
        f"{DEFAULT_MAX_CONCURRENT}.",
    )
    serve.add_argument(
        "--exit-when-idle",
        action="store_true",
        help="Exit once no run is queued or training and no dashboard of the store lives "
        "(after a minute of grace): how a dashboard launches its engine.",
    )
    serve.set_defaults(handler=_serve)
    return parser


def _add_train_arguments(parser: argparse.ArgumentParser, specs: Sequence[OptimizerSpec]) -> None:
    """`train`'s flags, made from the run fields and the knobs of `specs`."""
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE.json",
        help="Start from this run config, a JSON object with RunConfig's fields; flags "
        "given on the command line override its values.",
    )
    run = parser.add_argument_group("run")
    for knob in fields(specs):
        _add_knob(run, knob, knob.name, _show(knob.default) + ".")
    run.add_argument(
        "--task-weight",
        dest="task_weights",
        action="append",
        type=_task_weight,
        default=argparse.SUPPRESS,
        metavar="TASK=W",
        help="Loss weight of a task of the multi-task model (digit, parity), in [0, 1000]; "
        "repeatable. Default: 1 each.",
    )

    common = parser.add_argument_group("optimizer knobs", "Every optimizer has these.")
    specific = parser.add_argument_group(
        "knobs of some optimizers",
        None
        if any(spec.source != "core" for spec in specs)
        else "A plugin optimizer's own knobs are listed with `--optimizer NAME --help`.",
    )
    for knob, owners in _optimizer_knobs(specs):
        everyone = len(owners) == len(specs)
        extra = "" if everyone else f" For {', '.join(spec.name for spec in owners)}."
        # A plugin's knob whose flag is taken (say, one named `seed`) gets no flag;
        # `--config` still sets it.
        with contextlib.suppress(argparse.ArgumentError):
            _add_knob(
                common if everyone else specific,
                knob,
                HYPERPARAMETER + knob.name,
                _defaults_text(knob.name, owners) + extra,
            )


def _optimizer_knobs(specs: Sequence[OptimizerSpec]) -> list[tuple[Knob, list[OptimizerSpec]]]:
    """Each optimizer knob once (the first spec's), with the specs that have it; the run
    field `telemetry`, which the optimizers also declare, is left out."""
    owners: dict[str, tuple[Knob, list[OptimizerSpec]]] = {}
    for spec in specs:
        for knob in spec.knobs:
            if knob.name != "telemetry":
                owners.setdefault(knob.name, (knob, []))[1].append(spec)
    return list(owners.values())


def _add_knob(group: argparse._ArgumentGroup, knob: Knob, dest: str, default_text: str) -> None:
    """One flag for `knob`, storing into `dest` only when given (no argparse default)."""
    flag = "--" + knob.name.replace("_", "-")
    parts = [knob.help]
    if knob.range_text():
        parts.append(f"In {knob.range_text()}.")
    if knob.optional and knob.type in ("int", "float"):
        parts.append("'none' turns it off.")
    parts.append(f"Default: {default_text}")
    help_text = " ".join(parts).replace("%", "%%")  # argparse %-formats help
    common: dict[str, Any] = {"dest": dest, "default": argparse.SUPPRESS, "help": help_text}
    if knob.type == "bool":
        group.add_argument(flag, action=argparse.BooleanOptionalAction, **common)
    elif knob.type == "rules":  # --layer-rule, once per rule
        group.add_argument(
            flag.removesuffix("s"),
            action="append",
            type=_layer_rule,
            metavar="PATTERN:LR_MULT[:WEIGHT_DECAY]",
            **common,
        )
    else:
        flags = ("--lr", flag) if knob.name == "learning_rate" else (flag,)
        group.add_argument(*flags, type=_value_parser(knob), metavar=_metavar(knob), **common)


def _metavar(knob: Knob) -> str:
    if knob.type == "choice" and knob.choices:
        return "{" + ",".join(knob.choices) + "}"
    return {"int": "N", "float": "X"}.get(knob.type, "TEXT")


def _value_parser(knob: Knob) -> Callable[[str], Any]:
    """Turns a flag's text into what `knob.validate` takes: a number when it reads as one,
    None for `none` (optional knobs), else the text itself, for validation to refuse with
    the field's name (argparse's own message would name only the flag)."""

    def parse(text: str) -> Any:
        if knob.optional and text.lower() == "none":
            return None
        if knob.type not in ("int", "float"):
            return text
        # A float knob's text is read as a float: as an int, `1` and 400 zeros would be a
        # number that no float holds (1e400 reads as inf, which validation refuses).
        try:
            return read_number(text, real=knob.type == "float")
        except ValueError:
            return text

    return parse


def _layer_rule(text: str) -> dict[str, Any]:
    """`PATTERN:LR_MULT[:WEIGHT_DECAY]` as a rule mapping. The numbers are the last one or
    two `:`-fields, so a pattern may hold colons; validation checks the regex and ranges."""
    parts = text.split(":")
    numbers: list[float] = []
    while len(parts) > 1 and len(numbers) < 2 and _is_number(parts[-1]):
        numbers.insert(0, float(parts.pop()))
    if not numbers:
        raise argparse.ArgumentTypeError(
            f"needs PATTERN:LR_MULT[:WEIGHT_DECAY], e.g. 'dense:0.1:0.01' (got {text!r})"
        )
    rule: dict[str, Any] = {"pattern": ":".join(parts), "lr_mult": numbers[0]}
    if len(numbers) == 2:
        rule["weight_decay"] = numbers[1]
    return rule


def _task_weight(text: str) -> tuple[str, Any]:
    """`TASK=W` as a pair; a weight that is not a number is left for validation to refuse."""
    task, sep, weight = text.partition("=")
    if not sep or not task:
        raise argparse.ArgumentTypeError(f"needs TASK=WEIGHT, e.g. 'parity=0.5' (got {text!r})")
    return task, float(weight) if _is_number(weight) else weight


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _show(value: Any) -> str:
    """A default as the help shows it."""
    if value is None or value == ():
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _defaults_text(name: str, owners: Sequence[OptimizerSpec]) -> str:
    """A knob's default across optimizers: `0.01 (adam, adamw: 0.001)`."""
    by_value: dict[str, list[str]] = {}
    for spec in owners:
        knob = next(knob for knob in spec.knobs if knob.name == name)
        by_value.setdefault(_show(knob.default), []).append(spec.name)
    usual = max(by_value, key=lambda value: len(by_value[value]))
    others = "; ".join(
        f"{', '.join(names)}: {value}" for value, names in by_value.items() if value != usual
    )
    return f"{usual} ({others})." if others else f"{usual}."


# train -----------------------------------------------------------------------------------


def run_config(args: argparse.Namespace) -> RunConfig:
    """`train`'s `RunConfig`: the `--config` file's values, overridden by the flags given.

    Optimizer knobs go into `hyperparameters` only when given (in the file or as flags),
    so the optimizer's own defaults apply to the rest. Raises `UsageError` for a missing or
    malformed file and `InvalidHyperparameters` naming every bad field.
    """
    values = _read_config_file(args.config) if args.config is not None else {}
    hyperparameters: dict[str, Any] = {}
    for dest, value in vars(args).items():
        if dest.startswith(HYPERPARAMETER):
            hyperparameters[dest.removeprefix(HYPERPARAMETER)] = value
        elif dest == "task_weights":
            values["task_weights"] = _merged(values.get("task_weights"), dict(value))
        elif dest in RUN_FIELDS:
            values[dest] = value
    if hyperparameters:
        values["hyperparameters"] = _merged(values.get("hyperparameters"), hyperparameters)
    return RunConfig.from_dict(values)


def _merged(base: Any, overrides: dict[str, Any]) -> Any:
    """`base` updated with `overrides`; a `base` that is not a mapping is kept as it is,
    for validation to refuse."""
    if base is None:
        return overrides
    return {**base, **overrides} if isinstance(base, Mapping) else base


def _read_config_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise UsageError(f"config: cannot read {path}: {reason}") from None
    try:
        values = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"config: {path} is not valid JSON: {exc}") from None
    if not isinstance(values, dict):
        raise UsageError(f"config: {path} must hold a JSON object, not {type(values).__name__}")
    return values


def _train(args: argparse.Namespace) -> int:
    config = run_config(args)  # before the store: bad input writes nothing
    engine = Engine(_open_store(args.store, must_exist=False), max_concurrent=1)
    try:
        run_id = engine.start(config)
        print(run_id, flush=True)
        watch = _Watch(engine, run_id, ProgressBar(sys.stderr))
        try:
            status = watch.until_done()
            interrupted = False
        except KeyboardInterrupt:
            watch.bar.note(f"stopping run {run_id} (Ctrl-C)")
            with contextlib.suppress(InvalidHyperparameters):  # it may have just ended
                engine.stop(run_id)
            status = watch.until_done()
            interrupted = True
        print(format_summary(status), flush=True)
    finally:
        engine.close()
    if interrupted:
        return EXIT_INTERRUPTED
    if status.status == "completed":
        return EXIT_OK
    _error(_failure(status))
    return EXIT_FAILED


class _Watch:
    """Follows one run of `engine`: polls it, draws `bar`, and returns when it ends."""

    def __init__(self, engine: Engine, run_id: str, bar: ProgressBar) -> None:
        self.engine = engine
        self.run_id = run_id
        self.bar = bar
        self.latest: dict[str, float] = {}  # last logged loss and validation accuracy
        self._since: int | None = None  # last step read, for incremental reads
        self._first: tuple[float, int] | None = None  # (time, step) when steps first showed

    def until_done(self) -> RunStatus:
        while True:
            status = self.engine.wait(self.run_id, POLL_SECONDS)
            self._read_new_metrics()
            if not status.active:
                self.bar.finish(status, self.latest, status.steps_per_second)
                return status
            self.bar.update(status, self.latest, self._speed(status.step))

    def _speed(self, step: int) -> float | None:
        """Steps per second since the first step showed (not counting model building)."""
        now = time.monotonic()
        if self._first is None:
            if step > 0:
                self._first = (now, step)
            return None
        started, first_step = self._first
        return (step - first_step) / (now - started) if step > first_step else None

    def _read_new_metrics(self) -> None:
        metrics = self.engine.metrics(self.run_id, since_step=self._since)
        if not len(metrics):
            return
        self._since = metrics.last_step
        for key in ("loss", "val_accuracy"):
            if key in metrics:
                logged = metrics[key][~np.isnan(metrics[key])]
                if logged.size:
                    self.latest[key] = float(logged[-1])


class ProgressBar:
    """A run's progress on `stream`: one line redrawn in place on a terminal; elsewhere
    (a log file, a pipe) a new line every `line_every` seconds, and one at the end."""

    def __init__(self, stream: TextIO, *, width: int = 24, line_every: float = 10.0) -> None:
        self.stream = stream
        self.width = width
        self.line_every = line_every
        self._tty = stream.isatty()
        self._shown = 0  # characters on the terminal's current line
        self._last_line = -math.inf  # when the last line was written (not a terminal)

    def update(self, status: RunStatus, latest: Mapping[str, float], speed: float | None) -> None:
        text = render_progress(status, latest, speed, self.width)
        if self._tty:
            self._redraw(text)
        elif time.monotonic() - self._last_line >= self.line_every:
            self._last_line = time.monotonic()
            self.stream.write(text + "\n")
        self.stream.flush()

    def finish(self, status: RunStatus, latest: Mapping[str, float], speed: float | None) -> None:
        """The last state, on a line of its own."""
        text = render_progress(status, latest, speed, self.width)
        if self._tty:
            self._redraw(text)
            text = ""
        self.stream.write(text + "\n")
        self.stream.flush()
        self._shown = 0

    def note(self, message: str) -> None:
        """A message on its own line, below the bar."""
        self.stream.write(("\n" if self._shown else "") + message + "\n")
        self.stream.flush()
        self._shown = 0

    def _redraw(self, text: str) -> None:
        self.stream.write("\r" + text.ljust(self._shown))  # blanks cover a longer old line
        self._shown = len(text)


def render_progress(
    status: RunStatus, latest: Mapping[str, float], speed: float | None, width: int = 24
) -> str:
    """One line: bar, step/total, percent, loss, val_accuracy, `speed` in steps/s, ETA, and
    the status unless running: `[####----]  31/62  50%  loss 0.41  …  12.3 steps/s  ETA 0:03`.
    """
    if status.step == 0 and status.status in ("queued", "running"):
        return f"{status.id}  starting"
    parts = []
    if status.total_steps:
        done = min(status.step / status.total_steps, 1.0)
        filled = round(done * width)
        parts.append("[" + "#" * filled + "-" * (width - filled) + "]")
        parts.append(f"{status.step}/{status.total_steps}  {done:4.0%}")
    else:
        parts.append(f"step {status.step}")
    if "loss" in latest:
        parts.append(f"loss {latest['loss']:.4g}")
    if "val_accuracy" in latest:
        parts.append(f"val_acc {latest['val_accuracy']:.4f}")
    if speed:
        parts.append(f"{speed:.1f} steps/s")
        if status.active and status.total_steps:
            parts.append(f"ETA {_duration((status.total_steps - status.step) / speed)}")
    if status.status != "running":
        parts.append(status.status)
    return "  ".join(parts)


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"


def format_summary(status: RunStatus) -> str:
    """The final report: `run ID STATUS: STEP/TOTAL steps in S s (R steps/s)`, then one
    line per final metric."""
    final = status.final_metrics or {}
    head = f"run {status.id} {status.status}: {status.step}/{status.total_steps or '?'} steps"
    if final.get("seconds") is not None:
        head += f" in {final['seconds']:.1f} s"
    if final.get("steps_per_second"):
        head += f" ({final['steps_per_second']:.1f} steps/s)"
    lines = [head]
    lines += [f"  {key:<18} {final[key]:.6g}" for key in SUMMARY_KEYS if key in final]
    return "\n".join(lines)


def _failure(status: RunStatus) -> str:
    """Why a run did not complete, for the `error:` line."""
    final = status.final_metrics or {}
    if status.status == "diverged":
        loss = final.get("loss", float("nan"))
        return f"run {status.id} diverged: the loss was {loss:g} at step {final.get('diverged_at')}"
    if status.error:
        return f"run {status.id} {status.status}: {status.error}"
    return f"run {status.id} ended {status.status}"


# serve -----------------------------------------------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    from core.engine.server import serve

    if not 1 <= args.max_concurrent <= 64:
        raise UsageError(f"max_concurrent: must be in [1, 64] (got {args.max_concurrent})")
    path = default_path() if args.store is None else args.store
    try:
        Store(path).close()  # a corrupt or foreign file is refused before anything starts
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    return serve(path, max_concurrent=args.max_concurrent, exit_when_idle=args.exit_when_idle)


# runs and export -------------------------------------------------------------------------


def _runs(args: argparse.Namespace) -> int:
    with _open_store(args.store, must_exist=True) as store:
        records = store.list_runs()
    if args.json:
        print(json.dumps([run_json(record) for record in records], indent=2, allow_nan=False))
    elif records:
        print(format_runs(records))
    else:
        print(f"no runs in {args.store or default_path()}", file=sys.stderr)
    return EXIT_OK


def run_json(record: RunRecord) -> dict[str, Any]:
    """A run for `runs --json`: `id`, `name`, `status`, `optimizer`, `model`, `dataset`,
    `created`, `started`, `finished` (ISO 8601, UTC, or null), `step`, `total_steps`,
    `final_metrics`, `error` and `config`; NaN and infinities become null."""
    return _strict_json(
        {
            "id": record.id,
            "name": record.name,
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


def _export(args: argparse.Namespace) -> int:
    if args.csv is None and args.tensorboard is None:
        raise UsageError("export: give --csv PATH, --tensorboard DIR, or both")
    with _open_store(args.store, must_exist=True) as store:
        record = store.get_run(args.run_id)
        if record is None:
            raise UsageError(f"run_id: no run {args.run_id!r} in {store.path}")
        metrics = store.read_metrics(record.id)
        events = store.events(record.id)
    tensorboard = None
    if args.tensorboard is not None:  # the run id names a folder: checked before any write
        tensorboard = _writing(
            "tensorboard", lambda: safe_path(args.tensorboard, record.id, field="run_id")
        )
    if args.csv is not None:
        path = _writing("csv", lambda: write_csv(metrics, args.csv))
        print(f"wrote {path} ({len(metrics)} rows)")
    if tensorboard is not None:
        path = _writing(
            "tensorboard",
            lambda: write_tensorboard(metrics, tensorboard, events=events, config=record.config),
        )
        print(f"wrote {path}; view with: tensorboard --logdir {args.tensorboard}")
    return EXIT_OK


def _writing(field: str, write: Callable[[], Path]) -> Path:
    """`write()`, with an output path that cannot be written reported as bad input."""
    try:
        return write()
    except OSError as exc:
        reason = f"cannot write {exc.filename}: {exc.strerror}" if exc.strerror else str(exc)
        raise UsageError(f"{field}: {reason}") from None
    except ValueError as exc:  # from safe_path, naming the field
        raise UsageError(str(exc)) from None


# Helpers ---------------------------------------------------------------------------------


def _open_store(path: Path | None, *, must_exist: bool) -> Store:
    """The store at `path` (default: `default_path()`). With `must_exist`, a missing file
    is refused rather than created. `UsageError` if it is missing or cannot be used."""
    path = default_path() if path is None else path
    if must_exist and not path.exists():
        raise UsageError(f"no store at {path}")
    try:
        return Store(path)
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


def _error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr, flush=True)
