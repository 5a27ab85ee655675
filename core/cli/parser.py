"""`train`'s flags, made from the run fields and every optimizer's knobs, and the
`RunConfig` they give."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from core import data, models, optimizers
from core.cli.exits import UsageError
from core.data import files
from core.engine import FIELDS, RunConfig, fields
from core.engine.cluster import ADDRESS_VAR
from core.engine.repeats import VARY
from core.knobs import Knob, read_number
from core.optimizers import catalog
from core.optimizers.catalog import OptimizerSpec
from core.sweep import SAMPLERS

DEFAULT_MAX_CONCURRENT = 3  # the demo race's three runs train at once
HYPERPARAMETER = "hyperparameters."  # argparse dest prefix of optimizer knobs
RUN_FIELDS = frozenset(knob.name for knob in FIELDS)

EPILOG = """exit status:
  0    done; for train, the run completed
  1    the run diverged or failed
  2    bad input (flags, config, --config file, unknown run, missing or corrupt store);
       train then writes nothing
  130  Ctrl-C; train stops its run first
"""


def needs_plugins(argv: Sequence[str]) -> bool:
    """Whether the command lists the plugins (`catalog`), or `train`, `sweep` or
    `lr-find` may need one: it names an optimizer, a model or a dataset that is not
    built in, or takes a `--config` file (which may). Loading plugins imports
    TensorFlow, which `--help` and the other commands do without."""
    if "catalog" in argv:
        return True
    if not {"train", "sweep", "lr-find"} & set(argv):
        return False
    builtin = {
        "--optimizer": catalog.BUILTIN_NAMES,
        "--model": {m.name for m in models.catalog()},
        "--dataset": {d.name for d in data.catalog()},
    }
    for i, arg in enumerate(argv):
        flag, equals, given = arg.partition("=")
        if flag == "--config":
            return True
        if flag in builtin:
            name = given if equals else argv[i + 1] if i + 1 < len(argv) else None
            if name is not None and name not in builtin[flag] and not files.is_file(name):
                return True
    return False


def build_parser(
    specs: Sequence[OptimizerSpec] | None = None, *, plugins: bool | None = None
) -> argparse.ArgumentParser:
    """The `python -m core` parser, with `train` flags for the knobs of `specs` (default:
    every optimizer, plugins included) and the plugins' models and datasets among the
    choices if `plugins` (default: when `specs` is); the command's name is in
    `args.command`."""
    plugins = specs is None if plugins is None else plugins
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
        metavar="PATH|URL",
        help=(
            "The store: a SQLite file, or a postgresql:// URL that several machines share "
            "(default: $OPTLAB_STORE, else runs/optlab.sqlite)."
        ),
    )

    cluster = argparse.ArgumentParser(add_help=False)
    cluster.add_argument(
        "--ray-address",
        metavar="HOST:PORT",
        default=os.environ.get(ADDRESS_VAR) or None,
        help=(
            "Train on this Ray cluster: each run an actor on a node with its --num-cpus and "
            f"--num-gpus free (default: ${ADDRESS_VAR}; none: in this process)."
        ),
    )

    def training_command(name: str, help: str, description: str) -> argparse.ArgumentParser:
        """A command that trains: the store and cluster flags, and the run flags."""
        command = commands.add_parser(
            name,
            parents=[store, cluster],
            help=help,
            description=description,
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _add_train_arguments(command, specs, plugins)
        command.set_defaults(command=name)
        return command

    train = training_command(
        "train",
        help="Train one run, showing its progress; Ctrl-C stops it.",
        description="Train one run: print its id, its progress on stderr, then its final\n"
        "metrics. Optimizer knobs not given keep the optimizer's own defaults.",
    )
    repeats = train.add_argument_group("repeats")
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

    lr_find = training_command(
        "lr-find",
        help="A learning-rate range test: the loss as the rate grows, and a suggested rate.",
        description="Run a learning-rate range test of the config the run flags give (Smith "
        "2017): the rate grows exponentially from --lr-find-start (default 1e-7) to "
        "--learning-rate (default 10) over --max-steps steps (default 200), ending early "
        "once the loss explodes. The test is kept as a run of kind lr_find, which the "
        "dashboard shows again. Prints the loss against the rate, then `suggested "
        "learning_rate: VALUE` last: the rate where the smoothed log-loss falls fastest.",
    )
    lr_find.add_argument(
        "--json",
        action="store_true",
        help="Print one JSON object instead: the run id, each step's rate, loss and "
        "smoothed loss, why the test ended, and the suggestion (null when there is none).",
    )

    sweep = training_command(
        "sweep",
        help="Search hyperparameters: trials that are runs, drawn as a live table.",
        description="Run an Optuna study whose trials are runs of the config the run flags "
        "give, varying each --param; print each trial as it starts and ends, then the best. "
        "The study lives in the store: `--study NAME` alone joins a study (from another "
        "machine on a shared store, or a stopped one), and the dashboard's Sweep page shows "
        "it live. Ctrl-C stops the sweep and its runs.",
    )
    search = sweep.add_argument_group("search")
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
        help="Stop trials whose validation accuracy trails the others' at the same step.",
    )
    search.add_argument(
        "--study",
        metavar="NAME",
        help="The study's name (default: made from the time); if the store has it, join it.",
    )
    search.add_argument(
        "--sampler-seed",
        type=int,
        metavar="S",
        help="The sampler's seed (default: a random one); give each joining machine its own.",
    )

    resume = commands.add_parser(
        "resume",
        parents=[store],
        help="Continue a stopped or interrupted run from its last checkpoint (or unpause "
        "a paused one).",
        description="Continue a stopped or interrupted run from its last checkpoint, in "
        "this process and under the same id, showing its progress; the metrics it logged "
        "after that checkpoint are replaced. A paused run whose process lives is unpaused.",
    )
    resume.add_argument("run_id", metavar="RUN_ID", help="The run, as `runs` lists it.")
    resume.set_defaults(command="resume")

    delete = commands.add_parser(
        "delete",
        parents=[store],
        help="Delete ended runs with their metrics and checkpoints.",
        description="Delete ended runs with their metrics, events and checkpoints.",
    )
    delete.add_argument("run_ids", nargs="+", metavar="RUN_ID", help="The runs to delete.")
    delete.set_defaults(command="delete")

    listing = commands.add_parser(
        "catalog",
        help="List the models, datasets and optimizers, the plugins' included.",
        description="List every model, dataset and optimizer a run can name, with its "
        "description; the plugins' (from the plugins folder) say which file they come from.",
    )
    listing.set_defaults(command="catalog")

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
    runs.set_defaults(command="runs")

    export = commands.add_parser(
        "export",
        parents=[store],
        help="Export a run's metrics as CSV and/or TensorBoard event files, or its model.",
        description="Export a run's metrics: a CSV table, and/or TensorBoard event files "
        "in DIR/RUN_ID (so that `tensorboard --logdir DIR` lists every exported run); "
        "and/or its trained model, from one of its checkpoints, as a .keras file.",
    )
    export.add_argument("run_id", metavar="RUN_ID", help="The run, as `runs` lists it.")
    export.add_argument("--csv", type=Path, metavar="PATH", help="Write the CSV table here.")
    export.add_argument(
        "--tensorboard", type=Path, metavar="DIR", help="Write event files in DIR/RUN_ID."
    )
    export.add_argument(
        "--model",
        type=Path,
        metavar="PATH.keras",
        help="Write the trained model, with its optimizer, as a Keras file; load it with "
        "core.optimizers.load_model(PATH) and predict or train on.",
    )
    export.add_argument(
        "--checkpoint",
        default="last",
        metavar="{last,best,STEP}",
        help="The checkpoint --model takes: the last (default), the best validated, or the "
        "one of a step.",
    )
    export.set_defaults(command="export")

    fork = commands.add_parser(
        "fork",
        parents=[store],
        help="Start a new run from a checkpoint of another, with knobs or run fields changed.",
        description="Start a new run (a fork) from the checkpoint of step N of RUN_ID, with "
        "the live knobs and run fields given changed (name, max-steps, epochs, log-every, "
        "val-every, checkpoint-every; what the checkpoint holds cannot change: clone the "
        "run for that), and train it here, showing its progress.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fork.add_argument("run_id", metavar="RUN_ID", help="The run to fork, as `runs` lists it.")
    fork.add_argument(
        "--step",
        type=int,
        required=True,
        metavar="N",
        help="The checkpoint to start from (the run's checkpoints are listed by `runs "
        "--json`, under `checkpoints`).",
    )
    _add_run_flags(fork, specs, plugins)
    fork.set_defaults(command="fork")

    # Steering, through the store: whichever process trains the run carries it out.
    trainer = "the dashboard's engine, another terminal's `train`, or a script's LabCallback"
    for name, verb in (("stop", "Stop"), ("pause", "Pause")):
        steer = commands.add_parser(
            name,
            parents=[store],
            help=f"{verb} a run that trains, in any process.",
            description=f"{verb} a run that trains in any process ({trainer}), after its "
            "current step; returns once that process has done it. `resume RUN_ID` "
            "unpauses a paused run.",
        )
        steer.add_argument("run_id", metavar="RUN_ID", help="The run, as `runs` lists it.")
        steer.set_defaults(command=name)
    knobs = commands.add_parser(
        "set",
        parents=[store],
        help="Change live knobs of a run that trains, in any process, from its next step.",
        description=f"Change live knobs of a run that trains in any process ({trainer}) "
        "from its next step, each recorded as an event at that step; returns once that "
        "process has taken the change.",
    )
    knobs.add_argument("run_id", metavar="RUN_ID", help="The run, as `runs` lists it.")
    _add_task_weight_flag(knobs.add_argument_group("multi-task runs"), "Live.")
    _add_knob_flags(knobs, specs, live_only=True)
    knobs.set_defaults(command="set")

    serve = commands.add_parser(
        "serve",
        parents=[store, cluster],
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
    serve.set_defaults(command="serve")
    return parser


def _add_train_arguments(
    parser: argparse.ArgumentParser, specs: Sequence[OptimizerSpec], plugins: bool
) -> None:
    """`train`'s flags, made from the run fields and the knobs of `specs`."""
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE.json",
        help="Start from this run config, a JSON object with RunConfig's fields; flags "
        "given on the command line override its values.",
    )
    _add_run_flags(parser, specs, plugins)


def _add_run_flags(
    parser: argparse.ArgumentParser, specs: Sequence[OptimizerSpec], plugins: bool
) -> None:
    """A flag per run field and per knob of `specs`, each stored only when given; the
    plugins' models and datasets among the choices if `plugins`."""
    run = parser.add_argument_group("run")
    for knob in fields(specs, plugins=plugins):
        _add_knob(run, knob, knob.name, _show(knob.default) + ".")
    _add_task_weight_flag(run, "Default: 1 each.")
    _add_knob_flags(parser, specs)


def _add_task_weight_flag(group: argparse._ArgumentGroup, default_text: str) -> None:
    group.add_argument(
        "--task-weight",
        dest="task_weights",
        action="append",
        type=_task_weight,
        default=argparse.SUPPRESS,
        metavar="TASK=W",
        help="Loss weight of a task of the multi-task model (digit, parity), in [0, 1000]; "
        f"repeatable. {default_text}",
    )


def _add_knob_flags(
    parser: argparse.ArgumentParser, specs: Sequence[OptimizerSpec], *, live_only: bool = False
) -> None:
    """A flag per optimizer knob of `specs` (per live knob, if `live_only`), stored only
    when given."""
    common = parser.add_argument_group("optimizer knobs", "Every optimizer has these.")
    specific = parser.add_argument_group(
        "knobs of some optimizers",
        None
        if any(spec.source != "core" for spec in specs)
        else "A plugin optimizer's own knobs are listed with `--optimizer NAME --help`.",
    )
    for knob, owners in _optimizer_knobs(specs):
        if live_only and not knob.live:
            continue
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
    """Each optimizer knob once (the first spec's), with the specs that have it."""
    owners: dict[str, tuple[Knob, list[OptimizerSpec]]] = {}
    for spec in specs:
        for knob in spec.knobs:
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
    while len(parts) > 1 and len(numbers) < 2 and is_number(parts[-1]):
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
    return task, float(weight) if is_number(weight) else weight


def is_number(text: str) -> bool:
    """Whether `text` reads as a float."""
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


def run_config(args: argparse.Namespace) -> RunConfig:
    """`train`'s `RunConfig`: the `--config` file's values, overridden by the flags given.

    Optimizer knobs go into `hyperparameters` only when given (in the file or as flags),
    so the optimizer's own defaults apply to the rest. Raises `UsageError` for a missing or
    malformed file and `InvalidInput` naming every bad field.
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


def given_changes(args: argparse.Namespace) -> dict[str, Any]:
    """Each run field and knob given as a flag, by name: what `fork` and `set` change
    (`task_weights` as a list of (task, weight) pairs)."""
    changes: dict[str, Any] = {}
    for dest, value in vars(args).items():
        if dest.startswith(HYPERPARAMETER):
            changes[dest.removeprefix(HYPERPARAMETER)] = value
        elif dest in RUN_FIELDS or dest == "task_weights":
            changes[dest] = value
    return changes


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
