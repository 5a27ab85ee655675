"""`PopulationPlan`: what a population-based training asks for, checked before anything
starts (every bad field named at once, as `InvalidInput`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from core import data
from core.knobs import InvalidInput
from core.sweep.objective import TIME_TO_TARGET, Objective, objective_for
from core.sweep.plan import MAX_SEED
from core.sweep.space import Axis, Dimension, SearchSpace
from core.training.config import FIELDS, RunConfig

MAX_POPULATION: Final = 32
MAX_EPOCHS: Final = next(knob.high for knob in FIELDS if knob.name == "epochs")
DEFAULT_PERTURB: Final = (0.8, 1.2)


@dataclass(frozen=True)
class PopulationPlan:
    """A population of `population` runs of `config`, each `interval` × `generations`
    steps long, that exploit and explore (`core.population.exploit_explore`) at the end of
    every interval but the last, on the live knobs of `axes`, by `objective` on the
    validation split (logged at every interval's end). `seed` draws the starting knobs and
    every move; member m trains with seed `config.seed + m`."""

    config: RunConfig
    axes: tuple[Axis, ...]
    population: int
    interval: int
    generations: int
    objective: Objective
    quantile: float = 0.25
    perturb: tuple[float, ...] = DEFAULT_PERTURB
    resample: float = 0.25
    seed: int = 0

    @property
    def steps(self) -> int:
        """Every member's length."""
        return self.interval * self.generations

    @property
    def boundaries(self) -> range:
        """The steps at which members exploit and explore."""
        return range(self.interval, self.steps, self.interval)

    def member_config(self, member: int, knobs: dict[str, float], name: str) -> RunConfig:
        """The config member `member` starts with."""
        hyperparameters = {**self.config.hyperparameters, **knobs}
        return self.config.replace(
            name=f"{name} m{member}",
            hyperparameters=hyperparameters,
            seed=self.config.seed + member,
            max_steps=self.steps,
            epochs=MAX_EPOCHS,  # so that `max_steps` alone ends it, on any dataset's size
            val_every=self.interval,
            checkpoint_every=self.interval,
        )

    @classmethod
    def create(
        cls,
        config: RunConfig,
        space: SearchSpace,
        *,
        population: int,
        interval: int,
        generations: int,
        objective: str | None = None,
        quantile: float = 0.25,
        perturb: Sequence[float] = DEFAULT_PERTURB,
        resample: float = 0.25,
        seed: int = 0,
    ) -> PopulationPlan:
        """The plan, checked. Raises `InvalidInput` naming every bad field: a searched
        setting that is not a live number knob of the optimizer (explore changes knobs as
        a running member's live changes), a population outside [2, 32], an interval or
        generations below 1 or 2, a quantile outside (0, 0.5], perturbation factors that
        are not positive, a resample probability outside [0, 1]."""
        errors: dict[str, str] = {}
        axes: tuple[Axis, ...] = ()
        try:
            axes = space.axes(config)
        except InvalidInput as exc:
            errors |= exc.errors
        for axis in axes:
            if axis.is_run_field or not axis.knob.live or axis.dimension.categorical:
                errors[axis.name] = "must be a live number knob of the optimizer, as a range"
        if not _whole(population) or not 2 <= population <= MAX_POPULATION:
            errors["population"] = (
                f"must be a whole number in [2, {MAX_POPULATION}] (got {population!r})"
            )
        if not _whole(interval) or interval < 1:
            errors["interval"] = f"must be a whole number of steps, at least 1 (got {interval!r})"
        if not _whole(generations) or generations < 2:
            errors["generations"] = f"must be a whole number, at least 2 (got {generations!r})"
        if not _number(quantile) or not 0 < quantile <= 0.5:
            errors["quantile"] = f"must be in (0, 0.5] (got {quantile!r})"
        factors = tuple(perturb) if isinstance(perturb, Sequence) else ()
        if not factors or not all(_number(f) and f > 0 for f in factors):
            errors["perturb"] = f"must be factors above 0, e.g. 0.8,1.2 (got {perturb!r})"
        if not _number(resample) or not 0 <= resample <= 1:
            errors["resample"] = f"must be a probability in [0, 1] (got {resample!r})"
        if not _whole(seed) or not 0 <= seed <= MAX_SEED:
            errors["seed"] = f"must be a whole number in [0, {MAX_SEED}] (got {seed!r})"
        chosen: Objective | None = None
        if objective == TIME_TO_TARGET:
            errors["objective"] = "must be a validation metric: a member is scored at each interval"
        else:
            try:
                problem = data.dataset_catalog.info(
                    config.dataset, data_dir=config.data_dir
                ).problem
                chosen = objective_for(objective, problem)
            except InvalidInput as exc:
                errors |= exc.errors
        if errors:
            raise InvalidInput(errors)
        assert chosen is not None
        plan = cls(
            config,
            axes,
            int(population),
            int(interval),
            int(generations),
            chosen,
            float(quantile),
            tuple(float(f) for f in factors),
            float(resample),
            int(seed),
        )
        plan.member_config(0, {}, "check")  # raises if max_steps or val_every is out of range
        return plan

    def to_dict(self) -> dict[str, Any]:
        """The plan as plain data, for a record and the CLI's header; `from_dict` reads
        it back."""
        return {
            "config": self.config.to_dict(),
            "population": self.population,
            "interval": self.interval,
            "generations": self.generations,
            "objective": {
                "name": self.objective.name,
                "metric": self.objective.metric,
                "direction": self.objective.direction,
            },
            "space": [axis.dimension.to_dict() for axis in self.axes],
            "quantile": self.quantile,
            "perturb": list(self.perturb),
            "resample": self.resample,
            "seed": self.seed,
        }

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> PopulationPlan:
        """The plan `to_dict` wrote, checked again (`InvalidInput` naming what no longer
        holds, e.g. a knob an optimizer lost)."""
        try:
            config = RunConfig.from_dict(values["config"])
            space = SearchSpace(tuple(Dimension.from_dict(d) for d in values["space"]))
            return cls.create(
                config,
                space,
                population=values["population"],
                interval=values["interval"],
                generations=values["generations"],
                objective=values["objective"]["name"],
                quantile=values["quantile"],
                perturb=values["perturb"],
                resample=values["resample"],
                seed=values["seed"],
            )
        except (KeyError, TypeError) as exc:
            raise InvalidInput({"plan": f"is not a population's plan ({exc!r} missing)"}) from None


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return _whole(value) or (isinstance(value, float) and math.isfinite(value))
