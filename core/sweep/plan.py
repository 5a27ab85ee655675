"""`SweepPlan`: the checked, storable definition of a sweep, and the Optuna parts it makes.

A plan is what a sweep is, independent of where it runs: the base config, the space, the
sampler, the trial budget, pruning, parallelism and seed, and the objective (by default
the metric of the base config's dataset's problem). It is kept in its study (a
user attribute), so `Sweep.load` can resume a sweep from its storage alone.

Importing this module imports neither TensorFlow nor Optuna.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, cast

from core import data
from core.engine import RunConfig
from core.engine.repeats import MAX_REPEATS
from core.knobs import InvalidInput
from core.sweep.objective import ACCURACY, TIME_TO_TARGET, Objective, objective_for
from core.sweep.space import SPACE, Axis, SearchSpace
from core.training.config import INSTRUMENT_FIELDS

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution

SamplerName = Literal["grid", "random", "tpe"]
SAMPLERS: Final = ("grid", "random", "tpe")
MAX_TRIALS: Final = 10_000
MAX_PARALLEL: Final = 64
MAX_SEED: Final = 2**31 - 1
#: The plan's format in a study's user attributes; raise it with every change to it.
PLAN_VERSION: Final = 1


@dataclass(frozen=True)
class SweepPlan:
    """A sweep's definition; `create` checks it, and a plan that exists is valid.

    Attributes:
        base_config: What every trial runs, before its sampled values are applied.
        space: The settings varied.
        axes: `space` resolved against `base_config`.
        sampler: `grid` (every grid point, in a seeded random order), `random`, or `tpe`
            (Optuna's Tree-structured Parzen Estimator).
        n_trials: How many trials the sweep runs; at most the grid size for a grid.
        pruning: Whether unpromising trials are stopped early.
        parallel: How many trials train at once (the engine may queue some of them).
        seed: The sampler's seed.
        repeats: Runs per trial, over seeds seed … seed+N−1 (a group, see
            `core.engine.repeats`); the trial's value is their mean.
        objective: What the trials are scored by, and which way (see
            `core.sweep.objective`): by default the metric of the base config's
            dataset's problem.
    """

    base_config: RunConfig
    space: SearchSpace
    axes: tuple[Axis, ...]
    sampler: SamplerName
    n_trials: int
    pruning: bool
    parallel: int
    seed: int
    objective: Objective = ACCURACY
    repeats: int = 1

    @classmethod
    def create(
        cls,
        base_config: RunConfig,
        space: SearchSpace,
        *,
        n_trials: int | None,
        sampler: str,
        pruning: bool,
        parallel: int,
        seed: int,
        repeats: int = 1,
        objective: str | None = None,
        target: float | None = None,
    ) -> SweepPlan:
        """A checked plan. `n_trials=None` means the whole grid (grid sampler only), and a
        larger `n_trials` than the grid has points is lowered to it. `objective` names
        one of `core.sweep.objective`'s (default: the dataset's problem's metric);
        `target`, time to target's.

        Raises `InvalidInput` naming every bad argument (`n_trials`, `sampler`,
        `parallel`, `seed`, `pruning`, `repeats`, `objective`, `target`,
        `learning_rate, low`, ...) at once.
        """
        errors: dict[str, str] = {}
        axes: tuple[Axis, ...] = ()
        chosen = None
        if not isinstance(base_config, RunConfig):
            errors["base_config"] = f"must be a RunConfig (got {type(base_config).__name__})"
        elif not isinstance(space, SearchSpace):
            errors["space"] = f"must be a SearchSpace (got {type(space).__name__})"
        else:
            try:
                axes = space.axes(base_config)
            except InvalidInput as exc:
                errors |= exc.errors
            dataset = data.dataset_catalog.info(base_config.dataset, data_dir=base_config.data_dir)
            try:
                chosen = objective_for(objective, dataset.problem, target)
            except InvalidInput as exc:
                errors |= exc.errors
        if sampler not in SAMPLERS:
            errors["sampler"] = f"must be one of {', '.join(SAMPLERS)} (got {sampler!r})"
        if not isinstance(pruning, bool):
            errors["pruning"] = f"must be true or false (got {pruning!r})"
        elif pruning and chosen is not None and chosen.name == TIME_TO_TARGET:
            errors["pruning"] = f"does not apply to {TIME_TO_TARGET}: no step ranks runs early"
        if not _whole(parallel) or not 1 <= parallel <= MAX_PARALLEL:
            errors["parallel"] = f"must be a whole number in [1, {MAX_PARALLEL}] (got {parallel!r})"
        if not _whole(repeats) or not 1 <= repeats <= MAX_REPEATS:
            errors["repeats"] = f"must be a whole number in [1, {MAX_REPEATS}] (got {repeats!r})"
        if not _whole(seed) or not 0 <= seed <= MAX_SEED:
            errors["seed"] = f"must be a whole number in [0, {MAX_SEED}] (got {seed!r})"
        if n_trials is None and sampler != "grid":
            errors["n_trials"] = "is required unless the sampler is grid"
        elif n_trials is not None and (not _whole(n_trials) or not 1 <= n_trials <= MAX_TRIALS):
            errors["n_trials"] = f"must be a whole number in [1, {MAX_TRIALS}] (got {n_trials!r})"
        if sampler == "grid" and axes:
            size = math.prod(len(axis.grid()) for axis in axes)
            if size > MAX_TRIALS:
                errors[SPACE] = f"the grid has {size} points; at most {MAX_TRIALS}"
            elif "n_trials" not in errors:
                n_trials = size if n_trials is None else min(n_trials, size)
        if errors:
            raise InvalidInput(errors)
        assert n_trials is not None and chosen is not None  # refused above otherwise
        sampler_name = cast(SamplerName, sampler)
        return cls(
            base_config,
            space,
            axes,
            sampler_name,
            n_trials,
            pruning,
            parallel,
            seed,
            chosen,
            repeats,
        )

    def with_changes(self, **changes: Any) -> SweepPlan:
        """A checked copy with some of `create`'s arguments changed (e.g. on resuming)."""
        fields = {
            "base_config": self.base_config,
            "space": self.space,
            "n_trials": self.n_trials,
            "sampler": self.sampler,
            "pruning": self.pruning,
            "parallel": self.parallel,
            "seed": self.seed,
            "repeats": self.repeats,
            "objective": self.objective.name,
            "target": self.objective.target,
        }
        return SweepPlan.create(**(fields | changes))

    # Storing ------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values, for the study's user attributes."""
        return {
            "version": PLAN_VERSION,
            "base_config": self.base_config.to_dict(),
            "space": self.space.to_dict(),
            "sampler": self.sampler,
            "n_trials": self.n_trials,
            "pruning": self.pruning,
            "parallel": self.parallel,
            "seed": self.seed,
            "repeats": self.repeats,
            "objective": self.objective.name,
            "target": self.objective.target,
        }

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> SweepPlan:
        """The plan `to_dict` stored, checked again (the optimizers may have changed since)."""
        if values.get("version") != PLAN_VERSION:
            raise InvalidInput(
                {"plan": f"is of version {values.get('version')!r}; expected {PLAN_VERSION}"}
            )
        try:
            return cls.create(
                RunConfig.from_dict(values["base_config"]),
                SearchSpace.from_dict(values["space"]),
                n_trials=values["n_trials"],
                sampler=values["sampler"],
                pruning=values["pruning"],
                parallel=values["parallel"],
                seed=values["seed"],
                repeats=values.get("repeats", 1),  # a plan stored before repeats: one
                # A plan stored before objectives were chosen: its problem's metric.
                objective=values.get("objective"),
                target=values.get("target"),
            )
        except KeyError as exc:
            raise InvalidInput({"plan": f"lacks {exc}"}) from None

    # Trials -------------------------------------------------------------------------------

    def distributions(self) -> dict[str, BaseDistribution]:
        """What `study.ask` samples: one Optuna distribution per axis."""
        return {axis.name: axis.distribution() for axis in self.axes}

    def grid(self) -> dict[str, list[Any]]:
        """The grid points of every axis, for `GridSampler`."""
        return {axis.name: axis.grid() for axis in self.axes}

    def config_for(self, params: Mapping[str, Any], **run_fields: Any) -> RunConfig:
        """The base config with a trial's `params` (and other `run_fields`, e.g. its name)
        applied; raises `InvalidInput` if together they make no valid config."""
        on_run = {axis.name for axis in self.axes if axis.is_run_field}
        values = self.base_config.to_dict()
        hyperparameters = values["hyperparameters"] | {
            name: value for name, value in params.items() if name not in on_run
        }
        changes = {name: value for name, value in params.items() if name in on_run}
        return RunConfig.from_dict(
            values | changes | run_fields | {"hyperparameters": hyperparameters}
        )

    def trial_config(self, params: Mapping[str, Any], **run_fields: Any) -> RunConfig:
        """What a trial trains: `config_for`, with every instrument whose interval the
        plan leaves empty turned off. A trial is scored by its objective, and on a short
        run the instruments' own traced steps cost more than its training (figure 18:
        about 1.1 s of a 1.8 s trial of mlp on digits); a sweep that wants them sets
        their intervals. The best config (`Sweep.best_config`) keeps the defaults."""
        config = self.config_for(params, **run_fields)
        unset = {name: 0 for name in INSTRUMENT_FIELDS if getattr(config, name) is None}
        return config.replace(**unset)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
