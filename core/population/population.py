"""`Population`: population-based training (Jaderberg et al. 2017) driven on the lab's
engine, in a thread of the caller's process, as a sweep's driver is.

    >>> population = Population(engine, plan, name="pbt-lenet")
    >>> population.start()     # the members start; returns at once
    >>> population.wait()      # "completed", "stopped" or "failed"
    >>> population.members     # the run each member trains as now
    >>> population.moves       # every exploit: when, who copied whom, with which knobs

Members are runs of the engine, each `plan.steps` long, validating and saving a checkpoint
at every interval's end (`PopulationPlan.member_config`). Each member is told to pause at
the next interval's end (`Runs.pause(at_step=…)`); once all have paused there (or ended),
they are compared at that same step, and a member that failed, diverged or was stopped
before it counts as the worst. Then each exploiting member is stopped and replaced by a
fork of the member it copies, from that member's checkpoint of the interval's end, with
the explored knobs (live changes at the fork's first step, marked on its charts); the
fork is the member from then on, its `parent` and `forked_at` the lineage. The others
resume untouched. Every run of the population is tagged `population:NAME` and records, as its
launch, the population, the member it trains as and the plan.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from core.engine.api import Runs
from core.engine.status import RunStatus
from core.knobs import InvalidInput
from core.population.exploit_explore import exploits, sample
from core.population.lineage import TAG_PREFIX, PopulationView
from core.population.plan import PopulationPlan
from core.store import ACTIVE_STATUSES

POLL_SECONDS: Final = 0.1

#: A member's score at a step: its objective's value there, None if it has none (failed).
Scorer = Callable[[Runs, RunStatus, int], float | None]


@dataclass(frozen=True)
class Move:
    """An exploit: at step `step`, member `member` left run `replaced` for `run`, a fork
    of `source` (member `source_member`'s run) with `knobs`."""

    step: int
    member: int
    replaced: str
    source_member: int
    source: str
    run: str
    knobs: dict[str, float]


class Population:
    """A population-based training on `engine`; see the module docstring. `scorer`
    replaces the objective's value (tests order the members by it)."""

    def __init__(
        self,
        engine: Runs,
        plan: PopulationPlan,
        name: str,
        *,
        scorer: Scorer | None = None,
        poll_interval: float = POLL_SECONDS,
    ) -> None:
        self.engine = engine
        self.plan = plan
        self.name = name
        self.poll_interval = poll_interval
        self.members: list[str] = []
        self.moves: list[Move] = []
        self.status = "created"
        self.error: str | None = None
        self._score = scorer or self._objective_value
        self._meets = list(plan.boundaries)  # the interval ends still ahead
        self._stop = threading.Event()
        self._detached = False  # ended without stopping its runs (`detach`)
        self._thread = threading.Thread(target=self._drive, name="optlab-population", daemon=True)

    def _rng(self, step: int) -> np.random.Generator:
        """The draws of the moves at `step` (0: the starting knobs): from the plan's seed
        and the step alone, so that a driver that takes a population up again draws what
        the first would have."""
        return np.random.default_rng([self.plan.seed, step])

    @property
    def tag(self) -> str:
        return f"{TAG_PREFIX}{self.name}"

    def start(self) -> None:
        """Starts the members (`submit`) and the driver thread."""
        self.submit()
        self._thread.start()

    def submit(self) -> None:
        """Starts the members, labelled, each told to pause at the first interval's end,
        without a driver here: for the engine that trains them to take up
        (`core.population.hosting`). Raises `InvalidInput` as `engine.start_all` does, and
        then nothing started. The engine must train every member at once: a member queued
        behind the others, paused at an interval's end, would never start (on a Ray
        cluster, every member needs a place of its `num_cpus` and `num_gpus` at once)."""
        self._check_room()
        rng = self._rng(0)
        configs = [
            self.plan.member_config(
                member, {axis.name: sample(axis, rng) for axis in self.plan.axes}, self.name
            )
            for member in range(self.plan.population)
        ]
        self.members = self.engine.start_all(configs)
        for member, run_id in enumerate(self.members):
            self._label(run_id, member)
            self.engine.pause(run_id, at_step=self.plan.interval)
        self.status = "running"

    def _check_room(self) -> None:
        """Raises `InvalidInput` naming `population` if the engine (when it says) trains
        fewer of the members at once than the population has (`Runs.room`)."""
        at_once = self.engine.room(self.plan.config)
        if at_once is not None and at_once < self.plan.population:
            config = self.plan.config
            why = (
                f", as many as its Ray cluster's live nodes hold of members asking for "
                f"num_cpus {config.num_cpus:g} and num_gpus {config.num_gpus:g}"
                if self.engine.cluster_info()
                else ""
            )
            raise InvalidInput(
                {
                    "population": f"needs an engine that trains {self.plan.population} runs "
                    f"at once (this one trains {at_once}{why})"
                }
            )

    @classmethod
    def adopt(cls, engine: Runs, view: PopulationView, **options: Any) -> Population:
        """The population `view` shows, driven from here on (`start_adopted`): its members
        now, its exploits so far, the interval ends still ahead. Raises `InvalidInput` if
        its stored plan is no longer valid."""
        population = cls(engine, PopulationPlan.from_dict(view.plan), view.name, **options)
        population._check_room()
        population.members = [view.current[m].run.id for m in range(population.plan.population)]
        by_run = {stretch.run.id: stretch for stretch in view.stretches}
        population.moves = [
            Move(
                e.step,
                e.member,
                next(
                    (s.run.id for s in view.stretches if s.member == e.member and s.end == e.step),
                    "",
                ),
                e.source,
                e.source_run,
                e.run,
                {k: float(by_run[e.run].run.knobs[k]) for k in view.knobs},
            )
            for e in view.exploits
        ]
        meet = _next_meet(view)
        population._meets = [step for step in population.plan.boundaries if step >= meet]
        return population

    def start_adopted(self) -> None:
        """Drives an adopted population: each member that an engine's end interrupted
        trains again here, and every member is told to pause at the next interval's end
        (a pause asked of an engine that has closed since is forgotten)."""
        for run_id in self.members:
            if self._run(run_id).status == "interrupted":
                self.engine.resume(run_id)
            if self._meets:
                self.engine.pause(run_id, at_step=self._meets[0])
        self.status = "running"
        self._thread.start()

    def stop(self) -> None:
        """Stops the driver and every member still training."""
        self._stop.set()

    def detach(self) -> None:
        """Stops the driver, leaving its members as they are: the engine that closes
        interrupts them, and takes the population up again when it starts."""
        self._detached = True
        self._stop.set()

    def wait(self, timeout: float | None = None) -> str:
        """The population's status once its driver has ended (or after `timeout`)."""
        self._thread.join(timeout)
        return self.status

    @property
    def active(self) -> bool:
        return self._thread.is_alive()

    # The driver ------------------------------------------------------------------------

    def _drive(self) -> None:
        try:
            for step in self._meets:
                scores = self._gather(step)
                if scores is None:
                    return self._end("stopped")
                if all(score is None for score in scores.values()):
                    self.error = f"every member failed before step {step}"
                    return self._end("failed")
                self._exploit(step, scores)
            while any(self._run(m).status in ACTIVE_STATUSES for m in self.members):
                if self._stop.wait(self.poll_interval):
                    return self._end("stopped")
            ended = [self._run(m).status for m in self.members]
            self._end("completed" if "completed" in ended else "failed")
        except Exception as exc:  # the store or the engine failed: said, and the runs stop
            self.error = f"{type(exc).__name__}: {exc}"
            self._end("failed")

    def _gather(self, step: int) -> dict[int, float | None] | None:
        """Each member's score at `step`, once every member has paused there (each was
        told to, `Runs.pause(at_step=…)`) or has ended; None if stopped meanwhile."""
        scores: dict[int, float | None] = {}
        while len(scores) < len(self.members):
            for member, run_id in enumerate(self.members):
                if member in scores:
                    continue
                run = self._run(run_id)
                arrived = self._arrived(run, step)
                if run.status not in ACTIVE_STATUSES:  # ended before: the worst
                    scores[member] = self._score(self.engine, run, step) if arrived else None
                elif arrived and run.status == "paused":
                    scores[member] = self._score(self.engine, run, step)
            if len(scores) < len(self.members) and self._stop.wait(self.poll_interval):
                return None
        return scores

    def _arrived(self, run: RunStatus, step: int) -> bool:
        """Whether `run` has saved its checkpoint of `step` and its validation there is
        in the store (the run writes the metrics, then the checkpoint; the metrics are
        committed a moment later)."""
        if run.step < step:
            return False
        if not any(checkpoint.step == step for checkpoint in self.engine.checkpoints(run.id)):
            return False
        return step in self.engine.metrics(run.id, since_step=step - 1).steps

    def _exploit(self, step: int, scores: dict[int, float | None]) -> None:
        runs = {member: self._run(run_id) for member, run_id in enumerate(self.members)}
        knobs = {
            member: {axis.name: float(run.knobs[axis.name]) for axis in self.plan.axes}
            for member, run in runs.items()
        }
        moves = exploits(
            scores,
            knobs,
            self.plan.axes,
            self._rng(step),
            maximize=self.plan.objective.direction == "maximize",
            quantile=self.plan.quantile,
            perturb=self.plan.perturb,
            resample=self.plan.resample,
        )
        replaced = {move.member for move in moves}
        following = step + self.plan.interval
        meets = following < self.plan.steps  # the next interval's end, or the runs' end
        for move in moves:
            source, loser = self.members[move.source], self.members[move.member]
            if runs[move.member].status in ACTIVE_STATUSES:
                self.engine.stop(loser)
            fork = self.engine.fork(source, step, name=f"{self.name} m{move.member}", **move.knobs)
            self._label(fork, move.member)
            if meets:
                self.engine.pause(fork, at_step=following)
            self.members[move.member] = fork
            self.moves.append(Move(step, move.member, loser, move.source, source, fork, move.knobs))
        for member, run in runs.items():
            if member not in replaced and run.status == "paused":
                if meets:
                    self.engine.pause(run.id, at_step=following)
                self.engine.resume(run.id)

    def _label(self, run_id: str, member: int) -> None:
        """Tags the run with the population and records which member it trains as, with
        the plan (a `LAUNCH_EVENT`, which a recipe's reader passes over)."""
        self.engine.set_tags(run_id, [self.tag])
        launch = {"population": self.name, "member": member, "plan": self.plan.to_dict()}
        self.engine.record_launch([run_id], launch)

    def _end(self, status: str) -> None:
        if self._detached:
            self.status = "detached"
            return
        if status != "completed":
            for run_id in self.members:
                if self._run(run_id).status in ACTIVE_STATUSES:
                    self.engine.stop(run_id)
        self.status = status

    def _run(self, run_id: str) -> RunStatus:
        return self.engine.status(run_id)

    def _objective_value(self, engine: Runs, run: RunStatus, step: int) -> float | None:
        """The objective's metric as `run` validated at `step`; None if not finite."""
        metrics = engine.metrics(run.id, since_step=step - 1)
        metric = self.plan.objective.metric
        if metric not in metrics:
            return None
        at = metrics[metric][metrics.steps == step]
        value = float(at[0]) if len(at) else math.nan
        return value if math.isfinite(value) else None


def _next_meet(view: PopulationView) -> int:
    """The step at which `view`'s members meet next: the first interval end at or after
    the least step of a member now, past any interval end whose exploits were made (a fork
    from it, or a member trained past it)."""
    interval = int(view.plan["interval"])
    steps = [stretch.end for stretch in view.current.values()]
    meet = max(interval, -(-min(steps) // interval) * interval)
    done = {e.step for e in view.exploits} | {
        s.end for s in view.current.values() if s.run.status not in ("paused", "interrupted")
    }
    while meet in done:
        meet += interval
    return meet
