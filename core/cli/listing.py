"""`catalog`: every model, dataset and optimizer a run can name; its parser beside its
handler."""

from __future__ import annotations

import argparse
from pathlib import Path

from core import data, models, optimizers
from core.cli.exits import EXIT_OK
from core.cli.flags import Common, Subparsers


def add_catalog(commands: Subparsers, common: Common) -> None:
    """`catalog`."""
    del common
    command = commands.add_parser(
        "catalog",
        help="List the models, datasets and optimizers, the plugins' included.",
        description="List every model, dataset and optimizer a run can name, with its "
        "description; the plugins' (from the plugins folder) say which file they come from.",
    )
    command.set_defaults(command="catalog", handler=catalog)


def catalog(args: argparse.Namespace) -> int:
    """`catalog`: each model, dataset and optimizer with its description."""
    del args
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
