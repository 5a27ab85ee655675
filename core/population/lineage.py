"""A population read back from the store: its runs as members' stretches, its exploits,
each member's knob schedule, and the replay of a schedule as one plain run.

Everything here is read from what the driver wrote (`core.population.population`): each
run's tag `population:NAME`, the launch record naming the member it trains as and the
plan, a fork's `parent` and `forked_at`, and the knob events. So every session (a
reload, another browser, a room's viewers, another machine on a shared store) sees the
same population, whichever process drives it.

    >>> view = read_population(engine, "pbt-lenet")
    >>> view.current                          # each member's run now, by member
    >>> first, schedule = knob_schedule(engine, view.best().run.id)
    >>> schedule                               # [{"step": 41, "knobs": {...}}, …]
    >>> engine.start(replay_config(engine, run_id)) # the schedule, from scratch
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import numpy as np

from core.engine.status import RunStatus
from core.store import KNOB_EVENT, LAUNCH_EVENT, Event, Metrics
from core.training.config import RunConfig
from core.training.knob_schedule import KnobSchedule

#: The tag of every run of population NAME: `population:NAME`.
TAG_PREFIX: Final = "population:"


class Reader(Protocol):
    """The reads of `core.engine.api.Runs` a population is read back with (an engine, a
    client, a viewer's, or a store's `RunReader`)."""

    def status(self, run_id: str) -> RunStatus: ...
    def list(self) -> list[RunStatus]: ...
    def events(self, run_id: str, kind: str | None = None) -> list[Event]: ...
    def metrics(self, run_id: str, since_step: int | None = None) -> Metrics: ...


@dataclass(frozen=True)
class Stretch:
    """Member `member` trained as `run` from step `start` (the step its fork began
    after; 0 for a first member) to the run's step now. `values`: the objective's value
    at each step it validated there, by step."""

    run: RunStatus
    member: int
    start: int
    values: Mapping[int, float]

    @property
    def end(self) -> int:
        return self.run.step

    @property
    def last_value(self) -> float | None:
        """The objective at the last step validated; None before any (or not finite)."""
        if not self.values:
            return None
        value = self.values[max(self.values)]
        return value if math.isfinite(value) else None


@dataclass(frozen=True)
class Exploit:
    """At `step`, member `member` continued from member `source`'s run `source_run` as
    the fork `run`."""

    step: int
    member: int
    source: int
    source_run: str
    run: str


@dataclass(frozen=True)
class PopulationView:
    """A population as stored: `plan` as the driver recorded it (`PopulationPlan.to_dict`),
    every stretch in the order the runs were created."""

    name: str
    plan: Mapping[str, Any]
    stretches: tuple[Stretch, ...]

    @property
    def metric(self) -> str:
        return str(self.plan["objective"]["metric"])

    @property
    def maximize(self) -> bool:
        return self.plan["objective"]["direction"] == "maximize"

    @property
    def knobs(self) -> list[str]:
        """The knobs the population searches."""
        return [str(dimension["name"]) for dimension in self.plan["space"]]

    @property
    def current(self) -> dict[int, Stretch]:
        """Each member's run now (its latest), by member."""
        return {stretch.member: stretch for stretch in self.stretches}

    @property
    def exploits(self) -> list[Exploit]:
        """Every exploit, by step: a stretch that is a fork of another of the population."""
        by_run = {stretch.run.id: stretch for stretch in self.stretches}
        return sorted(
            (
                Exploit(s.start, s.member, by_run[s.run.parent].member, s.run.parent, s.run.id)
                for s in self.stretches
                if s.run.parent in by_run
            ),
            key=lambda exploit: (exploit.step, exploit.member),
        )

    def chain(self, member: int) -> list[Stretch]:
        """Member `member`'s run now and the runs of the population it was forked from,
        the first one first: the stretches its weights and knobs came through."""
        by_run = {stretch.run.id: stretch for stretch in self.stretches}
        chain = [self.current[member]]
        while (parent := chain[-1].run.parent) in by_run:
            chain.append(by_run[parent])
        return chain[::-1]

    def ranking(self) -> list[Stretch]:
        """The members' runs now, best objective first (those with none last)."""
        sign = -1.0 if self.maximize else 1.0
        return sorted(
            self.current.values(),
            key=lambda s: (s.last_value is None, sign * (s.last_value or 0.0), s.member),
        )

    def best(self) -> Stretch | None:
        """The member's run with the best objective now; None before any validated."""
        ranked = self.ranking()
        return ranked[0] if ranked and ranked[0].last_value is not None else None

    def best_over_time(self) -> list[tuple[int, float]]:
        """The population's best objective at each step any member validated."""
        pick = max if self.maximize else min
        at: dict[int, list[float]] = {}
        for stretch in self.stretches:
            for step, value in stretch.values.items():
                if math.isfinite(value):
                    at.setdefault(step, []).append(value)
        return [(step, pick(values)) for step, values in sorted(at.items())]


def population_of(run: RunStatus) -> str | None:
    """The population a run's tags name (`population:NAME`), None for a run of none."""
    return next(
        (tag.removeprefix(TAG_PREFIX) for tag in run.tags if tag.startswith(TAG_PREFIX)), None
    )


def population_names(runs: Iterable[RunStatus]) -> list[str]:
    """The populations of `runs` (`Runs.list`, newest first), newest first."""
    names: dict[str, None] = {}
    for run in runs:
        if (name := population_of(run)) is not None:
            names.setdefault(name)
    return list(names)


def read_population(
    engine: Reader, name: str, runs: Iterable[RunStatus] | None = None
) -> PopulationView | None:
    """Population `name` from the store (`runs`: `engine.list()` if not given); None if
    no run of it has a launch record yet."""
    tagged = [
        run for run in (engine.list() if runs is None else runs) if population_of(run) == name
    ]
    tagged.sort(key=lambda run: run.created)
    plan: Mapping[str, Any] | None = None
    stretches = []
    for run in tagged:
        launch = _launch(engine, run.id, name)
        if launch is None:
            continue  # tagged by the driver a moment before its record was written
        plan = launch["plan"]
        values = _objective(engine, run.id, str(plan["objective"]["metric"]))
        stretches.append(Stretch(run, int(launch["member"]), run.forked_at or 0, values))
    if plan is None:
        return None
    return PopulationView(name, plan, tuple(stretches))


def lineage(engine: Reader, run_id: str) -> list[RunStatus]:
    """Run `run_id` and the runs it was forked from, the first one first."""
    chain = [engine.status(run_id)]
    while (parent := chain[-1].parent) is not None:
        chain.append(engine.status(parent))
    return chain[::-1]


def knob_schedule(engine: Reader, run_id: str) -> tuple[RunStatus, KnobSchedule]:
    """The knobs run `run_id` trained with along its lineage, as the first run of the
    lineage and the changes made after it started: each run's knob events from the step
    after its fork to the step its child was forked at (the fork's own first-step
    changes are its parent's explore), those that changed nothing left out."""
    chain = lineage(engine, run_id)
    changes: dict[int, dict[str, Any]] = {}
    for index, run in enumerate(chain):
        begin = run.forked_at or 0
        end = chain[index + 1].forked_at if index + 1 < len(chain) else None
        for event in engine.events(run.id, KNOB_EVENT):
            if begin < event.step and (end is None or event.step <= end):
                changes.setdefault(event.step, {})[event.payload["name"]] = event.payload["value"]
    values = dict(chain[0].config.get("hyperparameters") or {})
    schedule: KnobSchedule = []
    for step in sorted(changes):
        made = {name: value for name, value in changes[step].items() if values.get(name) != value}
        values |= made
        if made:
            schedule.append({"step": step, "knobs": made})
    return chain[0], schedule


def replay_config(engine: Reader, run_id: str) -> RunConfig:
    """One plain run that trains from scratch as the first run of `run_id`'s lineage did,
    with the knob schedule the lineage followed, for as many steps as `run_id` trains:
    whether the schedule, not the weights a copy inherited, explains its result."""
    first, schedule = knob_schedule(engine, run_id)
    run = engine.status(run_id)
    return RunConfig.from_dict(first.config).replace(
        name=f"replay of {run.name}",
        max_steps=run.config.get("max_steps"),
        group=None,
        knob_schedule=schedule,
    )


def _launch(engine: Reader, run_id: str, name: str) -> Mapping[str, Any] | None:
    """The population's launch record on `run_id`, if it has one."""
    for event in engine.events(run_id, LAUNCH_EVENT):
        payload = event.payload
        if (
            isinstance(payload, Mapping)
            and payload.get("population") == name
            and isinstance(payload.get("member"), int)
            and isinstance(payload.get("plan"), Mapping)
        ):
            return payload
    return None


def _objective(engine: Reader, run_id: str, metric: str) -> dict[int, float]:
    """The objective's value at each step the run validated, by step."""
    metrics = engine.metrics(run_id)
    if metric not in metrics:
        return {}
    column = metrics[metric]
    known = ~np.isnan(column)
    return {
        int(step): float(value)
        for step, value in zip(metrics.steps[known], column[known], strict=True)
    }
