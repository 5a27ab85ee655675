"""Running a recipe on an engine: its runs started (each arm's repeats as one group), and
its verdict from what they stored, final once they have all ended or partial before.

    >>> recipe = RECIPES["edge_of_stability"]
    >>> launch = start(recipe, engine)       # its runs, tagged recipe:edge_of_stability
    >>> verdict(recipe, launch, engine)      # so far: the runs ended up to now
    >>> run(recipe, engine)                  # start, wait for every run, final verdict

`engine` is anything with the `Engine` verbs: `start_all(configs)` (to start runs
together), `record_launch`, `set_tags`, `wait`, `status` and `metrics`: an `Engine` or an
`EngineClient`. `Launch` is plain data (`to_dict`), which `start` records on each of its
runs, for any session to find again (`core.recipes.launches`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from core.engine.repeats import repeat_configs
from core.engine.status import RunStatus
from core.recipes.probe import PUBLISHED, Probe
from core.recipes.recipe import Recipe, RunResult, Verdict
from core.store import Metrics
from core.training.config import RunConfig

#: The tag every run of a recipe carries, `recipe:NAME`, so that a page finds them.
TAG_PREFIX = "recipe:"


class RecipeEngine(Protocol):
    """The engine verbs a recipe uses: some of `core.engine.api.Runs`' (an `Engine` or an
    `EngineClient`)."""

    def start_all(self, configs: Iterable[RunConfig]) -> list[str]: ...
    def record_launch(self, run_ids: Sequence[str], launch: Mapping[str, Any]) -> None: ...
    def set_tags(self, run_id: str, tags: Iterable[str]) -> None: ...
    def status(self, run_id: str) -> RunStatus: ...
    def metrics(self, run_id: str, since_step: int | None = None) -> Metrics: ...


class WaitingEngine(RecipeEngine, Protocol):
    """An engine `run` can wait on, for each run to end."""

    def wait(self, run_id: str, timeout: float | None = None) -> RunStatus: ...


@dataclass(frozen=True)
class Launch:
    """A recipe's started runs: the run ids of each arm, in seed order, and how they were
    probed (`Probe()`: as published). `to_dict` and `from_dict` keep it in the store
    (`start` records it on each of its runs), a page's session or a file."""

    recipe: str
    run_ids: Mapping[str, Sequence[str]]
    probe: Probe = PUBLISHED

    @property
    def all_ids(self) -> list[str]:
        return [run_id for ids in self.run_ids.values() for run_id in ids]

    def to_dict(self) -> dict[str, Any]:
        return {
            "recipe": self.recipe,
            "run_ids": {k: list(v) for k, v in self.run_ids.items()},
            "probe": {"seed": self.probe.seed, "overrides": dict(self.probe.overrides)},
        }

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Launch:
        """The launch `to_dict` wrote; raises `ValueError` naming the first field that is
        not as it writes it (a record written into the store by other hands)."""
        probe = values.get("probe", {})
        run_ids = values.get("run_ids")
        checks = {
            "recipe": isinstance(values.get("recipe"), str),
            "run_ids": isinstance(run_ids, Mapping)
            and all(
                isinstance(key, str)
                and isinstance(ids, list)
                and all(isinstance(i, str) for i in ids)
                for key, ids in run_ids.items()
            ),
            "probe": isinstance(probe, Mapping)
            and type(probe.get("seed", 0)) is int
            and isinstance(probe.get("overrides", {}), Mapping),
        }
        for name, good in checks.items():
            if not good:
                raise ValueError(f"{name}: not as a launch writes it")
        return cls(
            values["recipe"],
            {k: list(v) for k, v in run_ids.items()},
            Probe(probe.get("seed", 0), dict(probe.get("overrides", {}))),
        )


def configs(
    recipe: Recipe, max_steps: int | None = None, probe: Probe = PUBLISHED
) -> dict[str, list[RunConfig]]:
    """Each arm's run configs: its repeats over seeds, named after the recipe and the arm,
    as `probe` changes them. `max_steps` caps every run (a shortened recipe, for a test or
    a quick look). Raises `InvalidInput` naming what `probe` sets wrong."""
    arms = {arm.key: arm for arm in recipe.arms()}
    probed = probe.apply({key: arm.config for key, arm in arms.items()})
    out = {}
    for key, arm in arms.items():
        config = probed[key].replace(name=f"{recipe.title} · {key}")
        if max_steps is not None:
            config = config.replace(max_steps=min(max_steps, config.max_steps or max_steps))
        out[key] = repeat_configs(config, arm.repeats, "both")
    return out


def start(
    recipe: Recipe,
    engine: RecipeEngine,
    *,
    max_steps: int | None = None,
    probe: Probe = PUBLISHED,
) -> Launch:
    """Starts every run of `recipe` on `engine`, as `probe` changes them, and returns
    their ids. They start together, whole or not at all: every config is validated before
    the first run starts (`InvalidInput`). Each run gets the launch recorded on it, then
    the tag `recipe:NAME`: a run found by its tag has its launch already."""
    planned = configs(recipe, max_steps, probe)
    ids = engine.start_all([config for arm_configs in planned.values() for config in arm_configs])
    run_ids: dict[str, list[str]] = {}
    taken = iter(ids)
    for key, arm_configs in planned.items():
        run_ids[key] = [next(taken) for _ in arm_configs]
    launch = Launch(recipe.name, run_ids, probe)
    engine.record_launch(ids, launch.to_dict())
    for run_id in ids:
        engine.set_tags(run_id, [f"{TAG_PREFIX}{recipe.name}"])
    return launch


def results(launch: Launch, engine: RecipeEngine) -> dict[str, list[RunResult]]:
    """The launch's runs that have ended, by arm, with their stored metrics."""
    ended: dict[str, list[RunResult]] = {}
    for key, ids in launch.run_ids.items():
        ended[key] = []
        for run_id in ids:
            status = engine.status(run_id)
            if not status.active:
                ended[key].append(RunResult(run_id, status.status, engine.metrics(run_id)))
    return ended


def verdict(recipe: Recipe, launch: Launch, engine: RecipeEngine) -> Verdict:
    """`recipe`'s verdict on the runs of `launch` ended so far: final once all have."""
    return recipe.verdict(results(launch, engine))


def run(
    recipe: Recipe,
    engine: WaitingEngine,
    *,
    max_steps: int | None = None,
    probe: Probe = PUBLISHED,
    timeout: float | None = None,
    progress: Callable[[RunStatus, Verdict], None] | None = None,
) -> Verdict:
    """Starts `recipe` (as `probe` changes it), waits for each of its runs to end (calling
    `progress` with the run that ended and the verdict so far), and returns the final
    verdict. After `timeout` seconds the runs still going are left, and the verdict is
    partial."""
    launch = start(recipe, engine, max_steps=max_steps, probe=probe)
    deadline = None if timeout is None else time.monotonic() + timeout
    for run_id in launch.all_ids:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        status = engine.wait(run_id, left)
        if progress is not None and not status.active:
            progress(status, recipe.verdict(results(launch, engine)))
    return recipe.verdict(results(launch, engine))
