"""A recipe's launches, found again in the store: what every session shows of a recipe
(the Recipes page after a reload, in another browser, a room's viewers) is read from its
stored runs, never from the session that started it.

`start` records the `Launch` on each of its runs (a `LAUNCH_EVENT`: its runs by arm, its
probe), then tags them `recipe:NAME`. A recipe's latest launch is that of its newest
tagged run, so that a probe (another seed, knobs set) started after the published runs
is the one shown, and says it is a probe (`Launch.probe`).

    >>> latest(engine, engine.list())["edge_of_stability"].all_ids
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from core.engine.status import RunStatus
from core.recipes.runner import TAG_PREFIX, Launch
from core.store import LAUNCH_EVENT, Event


class LaunchReader(Protocol):
    """The engine verb a launch is read back with: `core.engine.api.Runs`' `events`."""

    def events(self, run_id: str, kind: str | None = None) -> list[Event]: ...


def recipe_of(tags: Sequence[str]) -> str | None:
    """The recipe a run's tags name (`recipe:NAME`), None for a run of none."""
    return next((tag.removeprefix(TAG_PREFIX) for tag in tags if tag.startswith(TAG_PREFIX)), None)


def recorded(engine: LaunchReader, run_id: str) -> Launch | None:
    """The launch recorded on run `run_id`; None for a run started otherwise (by hand,
    or before launches were recorded), or whose record does not name it."""
    for event in engine.events(run_id, LAUNCH_EVENT):
        if not isinstance(event.payload, Mapping):
            continue
        try:
            launch = Launch.from_dict(event.payload)
        except ValueError:
            continue  # written into the store by other hands: no launch of ours
        if run_id in launch.all_ids:
            return launch
    return None


def latest(engine: LaunchReader, runs: Iterable[RunStatus]) -> dict[str, Launch]:
    """Each recipe's latest launch whose runs are all still stored, by recipe name,
    newest first, from `runs`: the store's runs, newest first (`Runs.list`). A launch one
    of whose runs was deleted is passed over for the one before it: its verdict would
    count a run that is gone. One record is read a launch."""
    runs = list(runs)
    stored = {run.id for run in runs}
    found: dict[str, Launch] = {}
    read: set[str] = set()  # the runs of the launches read so far
    for run in runs:
        name = recipe_of(run.tags)
        if name is None or name in found or run.id in read:
            continue
        launch = recorded(engine, run.id)
        if launch is None or launch.recipe != name:
            continue
        read.update(launch.all_ids)
        if stored.issuperset(launch.all_ids):
            found[name] = launch
    return found
