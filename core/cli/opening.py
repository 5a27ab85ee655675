"""The store and the engine a command works on, opened once its input is checked."""

from __future__ import annotations

import argparse
from pathlib import Path

from core.cli.exits import UsageError
from core.cli.quiet import import_tensorflow_quietly
from core.engine import Engine
from core.engine.cluster import ClusterError, check_reachable
from core.store import Store, StoreError, canonical, default_location, is_url
from core.training import tf_import, threads


def open_engine(args: argparse.Namespace, *, max_concurrent: int, must_exist: bool) -> Engine:
    """An engine of the store `args.store`, on the Ray cluster `args.ray_address` if
    given; `UsageError` if either cannot be used (a cluster that does not answer, before
    the store is opened). Called once a command's input is checked, so TensorFlow, which
    the engine's runs load, is imported here (quietly) and not before a bad flag's error
    (which would wait for that import) or a location that is no store's; the rest of the
    training stack once the store is open, unless the runs train on a cluster. Runs that
    train here get TensorFlow's pools `threads.share_cores` chooses for `max_concurrent`
    runs, set before TensorFlow makes them."""
    location = canonical(args.store or default_location())
    if not args.ray_address:
        threads.share_cores(max_concurrent)
    import_tensorflow_quietly()
    try:
        if args.ray_address:
            check_reachable(args.ray_address)
    except ClusterError as exc:
        raise UsageError(str(exc)) from None
    store = open_store(location, must_exist=must_exist)
    if not args.ray_address:
        # Whole before the first run or trial starts, not in the engine's warm-up while a
        # sweep's first trial, asked of Optuna already, waits for it.
        tf_import.load()
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
