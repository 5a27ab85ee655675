"""The `python -m core` parser: each command's parser is made beside its handler, in the
module of its group; `build_parser` assembles them."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from core import data, models, optimizers
from core.cli import (
    listing,
    playground,
    populations,
    presenting,
    recipes,
    serving,
    steering,
    stored,
    sweeping,
    training,
)
from core.cli.exits import EPILOG
from core.cli.flags import Common
from core.data import files
from core.optimizers import optimizer_catalog
from core.optimizers.optimizer_catalog import OptimizerSpec

#: The commands, in the order `--help` lists them: each adds its parser (or, for `stop`,
#: `pause` and `set`, theirs), whose `handler` default runs it.
COMMANDS = (
    training.add_train,
    training.add_lr_find,
    sweeping.add_sweep,
    populations.add_pbt,
    training.add_resume,
    stored.add_delete,
    listing.add_catalog,
    stored.add_runs,
    stored.add_export,
    stored.add_landscape,
    recipes.add_recipe,
    playground.add_playground,
    training.add_fork,
    steering.add_steering,
    serving.add_serve,
    presenting.add_present,
)


def needs_plugins(argv: Sequence[str]) -> bool:
    """Whether the command lists the plugins (`catalog`), or `train`, `sweep`, `lr-find`
    or `playground` may need one: it names an optimizer, a model or a dataset that is not
    built in, or takes a `--config` file (which may). Loading plugins imports
    TensorFlow, which `--help` and the other commands do without."""
    if "catalog" in argv:
        return True
    if not {"train", "sweep", "lr-find", "playground"} & set(argv):
        return False
    builtin = {
        "--optimizer": optimizer_catalog.BUILTIN_NAMES,
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
    `args.command`, the function that runs it in `args.handler`."""
    plugins = specs is None if plugins is None else plugins
    specs = optimizers.specs() if specs is None else specs
    parser = argparse.ArgumentParser(
        prog="optlab" if Path(sys.argv[0]).name == "optlab" else "python -m core",
        description="Optimizer Lab from the command line: train runs, list them, export them.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    common = Common(specs, plugins)
    for add_parser in COMMANDS:
        add_parser(commands, common)
    return parser
