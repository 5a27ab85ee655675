"""The run flags: a flag per run field and per optimizer knob, made from their `Knob`s, and
the `RunConfig` they give; and what several commands' parsers share (`Common`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.cli.exits import EPILOG, UsageError
from core.engine import FIELDS, RunConfig, fields
from core.engine.cluster import ADDRESS_VAR
from core.knobs import Knob
from core.optimizers.optimizer_catalog import OptimizerSpec

HYPERPARAMETER = "hyperparameters."  # argparse dest prefix of optimizer knobs
RUN_FIELDS = frozenset(knob.name for knob in FIELDS)

# What `add_subparsers` returns (argparse names its class privately).
Subparsers = argparse._SubParsersAction


def _store_flags() -> argparse.ArgumentParser:
    """`--store`, which every command that reads or writes runs takes."""
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument(
        "--store",
        metavar="PATH|URL",
        help=(
            "The store: a SQLite file, or a postgresql:// URL that several machines share "
            "(default: $OPTLAB_STORE, else runs/optlab.sqlite)."
        ),
    )
    return store


def _cluster_flags() -> argparse.ArgumentParser:
    """`--ray-address`, which the commands that train take."""
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
    return cluster


@dataclass(frozen=True)
class Common:
    """What the commands' parsers are made from.

    Attributes:
        specs: The optimizers whose knobs are flags.
        plugins: Whether the plugins' models and datasets are among the choices.
        store: The `--store` flag, as an argparse parent.
        cluster: The `--ray-address` flag, as an argparse parent.
    """

    specs: Sequence[OptimizerSpec]
    plugins: bool
    store: argparse.ArgumentParser = field(default_factory=_store_flags)
    cluster: argparse.ArgumentParser = field(default_factory=_cluster_flags)


def add_training_command(
    commands: Subparsers, common: Common, name: str, *, help: str, description: str
) -> argparse.ArgumentParser:
    """A command that trains: the store and cluster flags, `--config` and the run flags.

    Args:
        commands: The parser's subcommands, to add this one to.
        common: The flags every command that trains shares, and the optimizers whose
            knobs become flags.
        name: The command, as typed (`train`).
        help: Its line in `optlab --help`'s list of commands.
        description: The paragraph that opens `optlab NAME --help`.
    """
    command = commands.add_parser(
        name,
        parents=[common.store, common.cluster],
        help=help,
        description=description,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument(
        "--config",
        type=Path,
        metavar="FILE.json",
        help="Start from this run config, a JSON object with RunConfig's fields; flags "
        "given on the command line override its values.",
    )
    add_run_flags(command, common)
    return command


def add_run_flags(parser: argparse.ArgumentParser, common: Common) -> None:
    """A flag per run field and per knob of `common.specs`, each stored only when given;
    the plugins' models and datasets among the choices if `common.plugins`."""
    run = parser.add_argument_group("run")
    for knob in fields(common.specs, plugins=common.plugins):
        _add_knob(run, knob, knob.name, _show(knob.default) + ".")
    add_task_weight_flag(run, "Default: 1 each.")
    add_knob_flags(parser, common.specs)


def add_task_weight_flag(group: argparse._ArgumentGroup, default_text: str) -> None:
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


def add_knob_flags(
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
        group.add_argument(*flags, type=knob.from_text, metavar=_metavar(knob), **common)


def _metavar(knob: Knob) -> str:
    if knob.type == "choice" and knob.choices:
        return "{" + ",".join(knob.choices) + "}"
    return {"int": "N", "float": "X"}.get(knob.type, "TEXT")


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


def run_config(args: argparse.Namespace, base: Mapping[str, Any] | None = None) -> RunConfig:
    """`train`'s `RunConfig`: the `--config` file's values (or `base`'s, a config as a
    mapping), overridden by the flags given.

    Optimizer knobs go into `hyperparameters` only when given (in the file or as flags),
    so the optimizer's own defaults apply to the rest. Raises `UsageError` for a missing or
    malformed file and `InvalidInput` naming every bad field.
    """
    if base is not None:
        values = dict(base)
    else:
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
