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
from typing import Final

import numpy as np

from core.engine.api import Runs
from core.engine.status import RunStatus
from core.knobs import InvalidInput
from core.population.exploit_explore import exploits, sample
from core.population.plan import PopulationPlan
from core.store import ACTIVE_STATUSES

TAG_PREFIX: Final = "population:"
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
        self._rng = np.random.default_rng(plan.seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drive, name="optlab-population", daemon=True)

    @property
    def tag(self) -> str:
        return f"{TAG_PREFIX}{self.name}"

    def start(self) -> None:
        """Starts the members (raises `InvalidInput` as `engine.start_all` does, and then
        nothing started) and the driver thread. The engine must train every member at
        once: a member queued behind the others, paused at an interval's end, would never
        start."""
        at_once = getattr(self.engine, "max_concurrent", None)
        if at_once is not None and at_once < self.plan.population:
            raise InvalidInput(
                {
                    "population": f"needs an engine that trains {self.plan.population} runs "
                    f"at once (this one trains {at_once})"
                }
            )
        configs = [
            self.plan.member_config(
                member, {axis.name: sample(axis, self._rng) for axis in self.plan.axes}, self.name
            )
            for member in range(self.plan.population)
        ]
        self.members = self.engine.start_all(configs)
        for member, run_id in enumerate(self.members):
            self._label(run_id, member)
            self.engine.pause(run_id, at_step=self.plan.interval)
        self.status = "running"
        self._thread.start()

    def stop(self) -> None:
        """Stops the driver and every member still training."""
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
            for step in self.plan.boundaries:
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
            self._rng,
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
