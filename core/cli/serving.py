"""`serve`: the engine of a store, in this process; its parser beside its handler."""

from __future__ import annotations

import argparse

from core.cli.exits import UsageError
from core.cli.flags import Common, Subparsers
from core.engine import server
from core.engine.cluster import ClusterError
from core.population.hosting import PopulationHost
from core.store import Store, StoreError, default_location
from core.sweep.hosting import SweepHost

DEFAULT_MAX_CONCURRENT = 3  # the demo race's three runs train at once


def add_serve(commands: Subparsers, common: Common) -> None:
    """`serve`."""
    command = commands.add_parser(
        "serve",
        parents=[common.store, common.cluster],
        help="Train the runs the dashboard starts, in this process (the dashboard launches "
        "one when none serves the store).",
        description="Serve the store: train the runs that the dashboard (or any client) "
        "hands over, drive the sweeps it hands over, and carry out the commands written "
        "for them. One engine serves a "
        "store at a time; a second exits at once. Ctrl-C or SIGTERM interrupts what "
        "still trains.",
    )
    command.add_argument(
        "--max-concurrent",
        type=int,
        default=DEFAULT_MAX_CONCURRENT,
        metavar="N",
        help=f"Runs that train at once; the rest wait in a queue. Default: "
        f"{DEFAULT_MAX_CONCURRENT}.",
    )
    command.add_argument(
        "--exit-when-idle",
        action="store_true",
        help="Exit once no run is queued or training and no dashboard of the store lives "
        "(after a minute of grace): how a dashboard launches its engine.",
    )
    command.set_defaults(command="serve", handler=serve)


def serve(args: argparse.Namespace) -> int:
    """Serves the store: trains what clients hand over until told to stop (or idle)."""
    if not 1 <= args.max_concurrent <= 64:
        raise UsageError(f"max_concurrent: must be in [1, 64] (got {args.max_concurrent})")
    location = args.store or default_location()
    try:
        Store(location).close()  # a corrupt or foreign store is refused before anything starts
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    try:
        return server.serve(
            location,
            max_concurrent=args.max_concurrent,
            exit_when_idle=args.exit_when_idle,
            ray_address=args.ray_address,
            # The engine drives the sweeps and the populations handed to it.
            hosts=(SweepHost, PopulationHost),
        )
    except ClusterError as exc:
        raise UsageError(str(exc)) from None
