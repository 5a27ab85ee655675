"""The optimizer catalog: every optimizer's name, knobs and update rule, without TensorFlow.

Forms, the CLI, run-config validation and the dashboard read optimizers from here; only
making one (`OptimizerSpec.build`, `core.optimizers.build`) imports TensorFlow. The
built-in optimizers are declared below, with the same fields a plugin gives `@register`,
and their update rules are written only here: each class's docstring shows the rules of
the names it is registered under. (A decorator on the class would need the class, and so
TensorFlow, to list them.) Plugin optimizers come from the plugins folder
(`core.optimizers.plugin_folder`, whose files import TensorFlow), unless this process
takes them from elsewhere (`use_plugin_source`): the dashboard, which must stay light,
takes the descriptions the engine process publishes in the store.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from core.knobs import InvalidInput, Knob, validate
from core.optimizers import plugin_folder
from core.optimizers.plugin_folder import plugins_folder
from core.optimizers.stages import COMMON_KNOBS, TELEMETRY

__all__ = [
    "BUILTIN",
    "BUILTIN_NAMES",
    "LR_SCHEDULES",
    "OptimizerSpec",
    "Plugins",
    "get_spec",
    "plugin_errors",
    "plugins",
    "plugins_folder",
    "specs",
    "use_plugin_source",
]

# The algorithms' own knobs (core/optimizers/algorithms.py), after the common ones.
MOMENTUM = Knob(
    "momentum",
    "float",
    0.9,
    "Momentum μ: how much of the previous step carries over.",
    low=0.0,
    high=1.0,
    high_open=True,
)
NESTEROV = Knob("nesterov", "bool", False, "Use Nesterov momentum.")
BETA_1 = Knob(
    "beta_1",
    "float",
    0.9,
    "Decay rate β₁ of the first-moment average.",
    low=0.0,
    high=1.0,
    high_open=True,
)
BETA_2 = Knob(
    "beta_2",
    "float",
    0.999,
    "Decay rate β₂ of the second-moment average.",
    low=0.0,
    high=1.0,
    high_open=True,
)
EPSILON = Knob(
    "epsilon",
    "float",
    1e-7,
    "ε added for numerical stability.",
    low=0.0,
    high=1.0,
    low_open=True,
    log_scale=True,
)
EPSILON_INSIDE_SQRT = Knob(
    "epsilon_inside_sqrt",
    "bool",
    False,
    "Divide by √(v + ε) instead of √v + ε: stabler when v is near zero.",
)
#: The learning-rate schedules a run can follow (see `core.optimizers.schedules`).
LR_SCHEDULES = ("constant", "cosine", "step")
SGD_KNOBS = COMMON_KNOBS
MOMENTUM_KNOBS = (*COMMON_KNOBS, MOMENTUM, NESTEROV)
ADAM_KNOBS = (*COMMON_KNOBS, BETA_1, BETA_2, EPSILON, EPSILON_INSIDE_SQRT)


@dataclass(frozen=True)
class OptimizerSpec:
    """Everything the lab knows about one named optimizer.

    Attributes:
        name: The registry name, e.g. `"adamw"`.
        implementation: Where its class lives, `module:Class`.
        summary: One sentence for a menu.
        update_rule: The update rule, in plain text with Unicode math.
        declared: The knobs the class declares, with the class's defaults.
        defaults: Knob defaults that differ from the class's (what makes `adamw` AdamW).
        required: Knobs that must not be `None` for this optimizer (`projected_gd`: radius).
        source: `"core"`, or the plugin file that registered it.
    """

    name: str
    implementation: str
    summary: str
    update_rule: str
    declared: tuple[Knob, ...]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    source: str = "core"

    @property
    def knobs(self) -> tuple[Knob, ...]:
        """The class's knobs with this optimizer's defaults."""
        return tuple(
            knob.with_default(self.defaults[knob.name]) if knob.name in self.defaults else knob
            for knob in self.declared
        )

    @property
    def cls(self) -> type:
        """The `LabOptimizer` subclass that implements it (imports TensorFlow): a built-in
        one found where `implementation` says, a plugin's as its plugin registered it,
        which exists only in a process that loaded the plugin (`LookupError` elsewhere)."""
        if self.source != "core":
            return plugin_folder.plugin_class(self.name)
        module, _, name = self.implementation.partition(":")
        return getattr(importlib.import_module(module), name)

    def validate(self, hyperparameters: Mapping[str, Any]) -> dict[str, Any]:
        """Every knob's value after validation, and `telemetry` (a constructor argument,
        not a knob) when given; raises `InvalidInput`."""
        knobs = (*self.knobs, TELEMETRY) if "telemetry" in hyperparameters else self.knobs
        values = validate(knobs, hyperparameters, owner=self.name)
        missing = {
            name: f"is required by {self.name}" for name in self.required if values[name] is None
        }
        if missing:
            raise InvalidInput(missing)
        return values

    def build(self, name: str | None = None, **hyperparameters: Any) -> Any:
        """A new optimizer with these hyperparameters (the rest take their defaults),
        named `name`; by default after this optimizer, as Keras names its objects
        (`adam`, then `adam_1`, ...; `adamw` as Keras's AdamW: `adam_w`). The learning
        rate may be a number, or what Keras also takes: a `LearningRateSchedule` or a
        function of nothing."""
        learning_rate = hyperparameters.get("learning_rate")
        if callable(learning_rate):
            rest = {k: v for k, v in hyperparameters.items() if k != "learning_rate"}
            values = self.validate(rest) | {"learning_rate": learning_rate}
        else:
            values = self.validate(hyperparameters)
        return self.cls(name=name or _auto_name(self.name), **values)

    def describe(self) -> dict[str, Any]:
        """A JSON-ready description, for forms, documentation and the store;
        `from_description` reads it back."""
        return {
            "name": self.name,
            "implementation": self.implementation,
            "summary": self.summary,
            "update_rule": self.update_rule,
            "source": self.source,
            "knobs": [
                {
                    **knob.__dict__,
                    "choices": list(knob.choices),
                    "range": knob.range_text(),
                    "required": knob.name in self.required,
                }
                for knob in self.knobs
            ],
        }

    @classmethod
    def from_description(cls, described: Mapping[str, Any]) -> OptimizerSpec:
        """The spec `describe()` described (its knobs carry this optimizer's defaults)."""
        knob_fields = set(Knob.__dataclass_fields__)
        knobs = tuple(
            Knob(
                **{
                    # JSON has lists only: the knob's choices and list defaults are tuples.
                    key: tuple(value) if isinstance(value, list) else value
                    for key, value in knob.items()
                    if key in knob_fields
                }
            )
            for knob in described["knobs"]
        )
        return cls(
            name=described["name"],
            implementation=described["implementation"],
            summary=described["summary"],
            update_rule=described["update_rule"],
            declared=knobs,
            required=tuple(k["name"] for k in described["knobs"] if k.get("required")),
            source=described["source"],
        )


BUILTIN: tuple[OptimizerSpec, ...] = (
    OptimizerSpec(
        "sgd",
        "core.optimizers.algorithms:SGD",
        "Plain gradient descent.",
        "θ ← θ − η·g",
        SGD_KNOBS,
    ),
    OptimizerSpec(
        "momentum",
        "core.optimizers.algorithms:Momentum",
        "Gradient descent with heavy-ball or Nesterov momentum.",
        "v ← μ·v − η·g;  θ ← θ + v",
        MOMENTUM_KNOBS,
    ),
    OptimizerSpec(
        "adam",
        "core.optimizers.algorithms:Adam",
        "Adam: per-parameter steps from running moments of g and g².",
        "m ← β₁m + (1−β₁)g;  v ← β₂v + (1−β₂)g²;  θ ← θ − η·√(1−β₂ᵗ)/(1−β₁ᵗ)·m/(√v + ε)",
        ADAM_KNOBS,
        defaults={"learning_rate": 0.001},
    ),
    OptimizerSpec(
        "adamw",
        "core.optimizers.algorithms:Adam",
        "Adam with decoupled weight decay (Loshchilov & Hutter), as Keras's AdamW.",
        "θ ← θ − η·λ·θ;  then the Adam step",
        ADAM_KNOBS,
        defaults={"learning_rate": 0.001, "weight_decay": 0.004},
        required=("weight_decay",),  # as Keras's AdamW: without it, this is adam
    ),
    OptimizerSpec(
        "clipped_adam",
        "core.optimizers.algorithms:Adam",
        "Adam on gradients clipped to a global norm.",
        "g ← g·min(1, c/‖g‖);  then the Adam step",
        ADAM_KNOBS,
        defaults={"learning_rate": 0.001, "clip_norm": 1.0},
    ),
    OptimizerSpec(
        "projected_gd",
        "core.optimizers.algorithms:SGD",
        "Gradient descent that keeps all parameters, as one vector θ, inside the L2 ball "
        "‖θ‖ ≤ r: after each step θ is scaled back onto the ball if it left it.",
        "θ ← θ − η·g;  θ ← θ·min(1, r/‖θ‖)",
        SGD_KNOBS,
        defaults={"radius": 1.0},
        required=("radius",),
    ),
)
BUILTIN_NAMES = frozenset(spec.name for spec in BUILTIN)

# Plugins: (their specs, the files that failed to load with the reason).
Plugins = tuple[list[OptimizerSpec], dict[str, str]]
_lock = threading.Lock()
_plugin_source: Callable[[], Plugins] | None = None


def use_plugin_source(source: Callable[[], Plugins] | None) -> None:
    """Take plugin optimizers from `source()` instead of importing the plugins folder
    (None: import it again). For a process that must never import TensorFlow."""
    global _plugin_source
    with _lock:
        _plugin_source = source


def plugins() -> Plugins:
    """The plugin optimizers and the plugin files that failed to load."""
    with _lock:
        source = _plugin_source
    if source is not None:
        return source()
    return plugin_folder.loaded_plugins()  # imports the plugins, and TensorFlow


def specs() -> list[OptimizerSpec]:
    """Every optimizer: the built-in ones first, then plugins."""
    return [*BUILTIN, *plugins()[0]]


def plugin_errors() -> dict[str, str]:
    """The plugin files that failed to load, with the reason."""
    return plugins()[1]


def get_spec(name: str) -> OptimizerSpec:
    """The spec named `name`; raises `InvalidInput` naming `optimizer` if none.
    A built-in name never loads the plugins."""
    if not isinstance(name, str):
        raise InvalidInput({"optimizer": f"must be an optimizer's name (got {name!r})"})
    for spec in BUILTIN:
        if spec.name == name:
            return spec
    with _lock:
        source = _plugin_source
    # A plugin loaded already is found without looking through the folder again: each
    # run config, live change and trial asks for its optimizer's spec.
    if source is None and (spec := plugin_folder.registered(name)) is not None:
        return spec
    known = specs()
    for spec in known:
        if spec.name == name:
            return spec
    names = ", ".join(spec.name for spec in known)
    raise InvalidInput({"optimizer": f"unknown optimizer {name!r} (known: {names})"})


def _auto_name(prefix: str) -> str:
    """`prefix`, then `prefix_1`, `prefix_2`...: Keras's own object names, counted by
    Keras (so that `keras.backend.get_uid` and Keras's names never clash with ours). A
    name that Keras's optimizers answer to as well (`keras.optimizers.get("adamw")`) is
    spelled as Keras spells that class's objects: `adam_w`."""
    import keras

    from core.optimizers.keras_internals import snake_case

    for name, cls in vars(keras.optimizers).items():
        if name.lower() == prefix and isinstance(cls, type):
            prefix = snake_case(name)
    uid = keras.backend.get_uid(prefix)
    return prefix if uid == 1 else f"{prefix}_{uid - 1}"
