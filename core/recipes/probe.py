"""`Probe`: a recipe run otherwise than as published, to try to break its verdict: at
another seed, and with run fields or optimizer knobs set on every arm
(`optlab recipe run NAME --seed S --set KNOB=VALUE`, the Recipes page's "Try to break
it"). A recipe's negative control is a probe too (`Recipe.control`): a setting under
which its finding must vanish.

The verdict of a probed recipe is the same measure on the probed runs, with the recipe's
stated numbers (its radii, its rates): with `--set radius=1000` the projection recipe
still asks whether ‖θ‖ stayed within r = 16, 13 and 10, and must say no.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.knobs import InvalidInput, Knob
from core.optimizers import optimizer_catalog
from core.training.config import RunConfig, run_fields

#: `--seed S` moves every run's seed by S × this: more than an arm's repeats, so that no
#: two seeds of a recipe share a run's initial weights or batch order.
SEED_STRIDE = 1_000
#: The run fields a probe may not set: what names a run, or makes it another recipe.
FIXED_FIELDS = frozenset({"name", "hyperparameters", "optimizer", "model", "dataset", "group"})


@dataclass(frozen=True)
class Probe:
    """How a recipe's runs differ from the published ones.

    Attributes:
        seed: 0 is the recipe as published; S moves every run's seed (its initial
            weights and its batch order) by S × `SEED_STRIDE`.
        overrides: Values by name, each a run field (`batch_size`) or a knob of an arm's
            optimizer (`radius`), set on every arm that has it; text (as typed) is read
            as the field's or knob's type.
    """

    seed: int = 0
    overrides: Mapping[str, Any] = field(default_factory=dict)

    @property
    def published(self) -> bool:
        """Whether this is the recipe as published: seed 0, nothing set."""
        return self.seed == 0 and not self.overrides

    def text(self) -> str:
        """`seed 2; radius = 1000, batch_size = 128 on every arm` (empty: as published)."""
        parts = [f"seed {self.seed}"] if self.seed else []
        if self.overrides:
            values = ", ".join(f"{name} = {_shown(v)}" for name, v in self.overrides.items())
            parts.append(f"{values} on every arm")
        return "; ".join(parts)

    def apply(self, configs: Mapping[str, RunConfig]) -> dict[str, RunConfig]:
        """Each arm's config, by key, probed. Raises `InvalidInput` naming each override
        that no arm has, or whose value its field or knob refuses: nothing then starts."""
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise InvalidInput({"seed": f"must be a whole number ≥ 0 (got {self.seed!r})"})
        errors = {
            name: "names the run or its recipe: a probe may not set it"
            for name in self.overrides
            if name in FIXED_FIELDS
        }
        used: set[str] = set()
        probed = {}
        for key, config in configs.items():
            fields: dict[str, Any] = {}
            knobs = dict(config.hyperparameters)
            for name, value in self.overrides.items():
                knob = _knob(config, name)
                if name in errors or knob is None:
                    continue
                used.add(name)
                read = knob.from_text(value) if isinstance(value, str) else value
                (knobs if name in knobs else fields)[name] = read
            try:
                probed[key] = config.replace(
                    **fields, hyperparameters=knobs, seed=config.seed + self.seed * SEED_STRIDE
                )
            except InvalidInput as exc:
                errors |= {name.split(".")[-1]: why for name, why in exc.errors.items()}
        for name in self.overrides:
            if name not in used and name not in errors:
                errors[name] = "is neither a run field nor a knob of this recipe's optimizers"
        if errors:
            raise InvalidInput(errors)
        return probed


#: The recipe as published: seed 0, nothing set.
PUBLISHED = Probe()


def assignment(text: str) -> tuple[str, str]:
    """`KNOB=VALUE` as typed (a `--set` flag, a line of the page's form) as (knob, its
    text), the value read as the knob's type by `Probe.apply`; raises `ValueError`."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise ValueError(f"must read KNOB=VALUE (got {text!r})")
    return name.strip(), value.strip()


def _shown(value: Any) -> str:
    """A value as typed: text as it is, a number in its shortest form (1000, not 1000.0)."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def _knob(config: RunConfig, name: str) -> Knob | None:
    """The run field or the knob of `config`'s optimizer called `name`, None if neither."""
    spec = optimizer_catalog.get_spec(config.optimizer)
    by_name = {knob.name: knob for knob in spec.knobs}
    return by_name.get(name) or run_fields().get(name)
