"""`RunConfig`: one validated, JSON-serializable description of a training run.

The run's own fields are declared as `Knob`s, like the optimizers' hyperparameters, so the
dashboard and the CLI build their inputs from the same ranges and help that validation
uses. Validation lists every bad field at once (run fields and optimizer knobs alike), and
a `RunConfig` that exists is valid: nothing can start from an invalid one.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from core import data, models
from core.data.files import shown_name
from core.knobs import InvalidInput, Knob, KnobType
from core.optimizers import optimizer_catalog
from core.optimizers.optimizer_catalog import LR_SCHEDULES, OptimizerSpec
from core.readable import number
from core.training.instruments import INSTRUMENTS
from core.training.knob_schedule import checked_schedule
from core.training.per_layer_schedule import BUDGET as PER_LAYER_BUDGET

STRATEGIES = ("default", "mirrored", "multiworker")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
# How many times a run measures an instrument of `spacing` 1 when its interval field is
# empty (see `instrument_intervals`).
MEASUREMENTS_PER_RUN = 20
TASKS = ("digit", "parity")
LR_FIND = "lr_find"
RUN_KINDS = ("train", LR_FIND)

#: The key of a `RunConfig` field's metadata that holds its `Knob`'s arguments.
KNOB = "knob"


def _run_field(type: KnobType, default: Any, help: str, **limits: Any) -> Any:
    """A `RunConfig` field that is a `Knob`: its default, and in its metadata the knob's
    other arguments; the knob's name is the attribute's (see `FIELDS`)."""
    knob = {"type": type, "default": default, "help": help, **limits}
    return field(default=default, metadata={KNOB: knob})


def _interval_field(instrument: str) -> Any:
    """The `{instrument}_every` field: its help and default interval from the
    instrument's class (see `instrument_intervals`)."""
    cls = INSTRUMENTS[instrument]
    return _run_field(
        "int",
        None,
        f"{cls.field_help} every this many steps (0: off; empty: about "
        f"{MEASUREMENTS_PER_RUN // cls.spacing} times a run).",
        low=0,
        high=10**6,
        optional=True,
    )


@dataclass(frozen=True)
class RunConfig:
    """A valid run configuration: `RunConfig(**fields)` or `RunConfig.from_dict(values)`.

    Each attribute is declared once, here: the run fields are `Knob`s (see `FIELDS`, which
    forms and the CLI are built from), plus:
        hyperparameters: The optimizer's knobs, validated by its spec, every knob filled in.
        task_weights: The loss weight of each task of the multi-task model.
        knob_schedule: Live knob changes planned at steps, `[{"step": S, "knobs": {name:
            value}}, …]` (`core.training.knob_schedule`): a replayed schedule.
    """

    name: str | None = _run_field(
        "text", None, "A label for the run (its id stays unique).", optional=True
    )
    dataset: str = _run_field(
        "choice",
        data.DEFAULT_DATASET,
        "What to train on: a name, or npz:PATH or csv:PATH for a file of yours.",
        choices=tuple(d.name for d in data.catalog()),
    )
    model: str = _run_field(
        "choice",
        models.DEFAULT_MODEL,
        "The network; it outputs logits.",
        choices=tuple(m.name for m in models.catalog()),
    )
    # Its choices are the optimizer registry's names, plugins included: see `_check`.
    optimizer: str = _run_field("choice", "adamw", "A registry name; see the Optimizers page.")
    hyperparameters: Mapping[str, Any] = field(default_factory=dict)
    batch_size: int = _run_field(
        "int", 64, "Examples per step, across all replicas.", low=1, high=8192
    )
    epochs: int = _run_field("int", 10, "Passes over the training split.", low=1, high=10_000)
    max_steps: int | None = _run_field(
        "int",
        None,
        "Stop after this many steps, even mid-epoch.",
        low=1,
        high=100_000_000,
        optional=True,
    )
    lr_schedule: str = _run_field(
        "choice",
        "constant",
        "How the learning rate moves over the run: constant; cosine, down to 0 at its last "
        "step; step, ×0.1 at its half and at three quarters. A live learning_rate change "
        "scales the schedule.",
        choices=LR_SCHEDULES,
    )
    warmup_steps: int = _run_field(
        "int",
        0,
        "Grow the learning rate linearly from 0 over this many first steps.",
        low=0,
        high=100_000_000,
    )
    seed: int = _run_field(
        "int",
        0,
        "Initial weights and batch order (unless data_seed is set): same seed, same both.",
        low=0,
        high=2**31 - 1,
    )
    data_seed: int | None = _run_field(
        "int",
        None,
        "The batch order's own seed (empty: the seed's), so that repeats can vary the "
        "initial weights alone.",
        low=0,
        high=2**31 - 1,
        optional=True,
    )
    group: str | None = _run_field(
        "text",
        None,
        "The repeats this run is one of: runs of one config over seeds (see `repeats`).",
        optional=True,
    )
    log_every: int = _run_field(
        "int", 1, "Record telemetry every this many steps.", low=1, high=10**6
    )
    per_layer_every: int | None = _run_field(
        "int",
        None,
        "Record the per-layer statistics every this many steps, a multiple of log_every "
        f"(empty: with log_every 1, as often as keeps them within {PER_LAYER_BUDGET:.0%} of the "
        "training time, "
        "measured as the run trains; else at every logged step).",
        low=1,
        high=10**6,
        optional=True,
    )
    val_every: int | None = _run_field(
        "int",
        None,
        "Validate every this many steps (empty: at the end of every epoch).",
        low=1,
        high=100_000_000,
        optional=True,
    )
    telemetry: bool = _run_field(
        "bool",
        True,
        "Record norms, clipping, projection and per-layer statistics, not only the loss.",
    )
    # One interval field per instrument, in the order of `INSTRUMENTS`.
    alpha_every: int | None = _interval_field("alpha")
    sharpness_every: int | None = _interval_field("sharpness")
    noise_scale_every: int | None = _interval_field("noise_scale")
    histogram_every: int | None = _interval_field("histogram")
    sharpness_examples: int | None = _run_field(
        "int",
        None,
        "Measure sharpness on the first this many examples of the training split, in its "
        "stored order, the same for every run of the dataset (empty: on the run's first "
        "batch), so that runs of different batch sizes or seeds compare on the same data.",
        low=1,
        high=100_000_000,
        optional=True,
    )
    checkpoint_every: int | None = _run_field(
        "int",
        None,
        "Save a checkpoint every this many steps, to resume or fork from (0: never; "
        "empty: about every 30 s of training, at most 2% of its time). A run also saves "
        "one when it stops, pauses or ends.",
        low=0,
        high=100_000_000,
        optional=True,
    )
    precision: str = _run_field(
        "choice",
        "float32",
        "The layers' arithmetic: float32, or 16 bits (bfloat16, or float16 with dynamic loss "
        "scaling) with float32 weights and optimizer state.",
        choices=PRECISIONS,
    )
    multitask: bool = _run_field(
        "bool",
        False,
        "Train two heads, the class and its parity, with a loss weight per task.",
    )
    task_weights: Mapping[str, float] = field(default_factory=lambda: dict.fromkeys(TASKS, 1.0))
    knob_schedule: Sequence[Mapping[str, Any]] = field(default_factory=list)
    strategy: str = _run_field(
        "choice",
        "default",
        "default: one device; mirrored: every local device; multiworker: from TF_CONFIG.",
        choices=STRATEGIES,
    )
    data_dir: str | None = _run_field(
        "text",
        None,
        "TFDS data dir, for TFDS datasets (a run handed to the engine through the store, "
        "as the dashboard's are: the engine's own only).",
        optional=True,
    )
    kind: str = _run_field(
        "choice",
        "train",
        "train: a training run; lr_find: a learning-rate range test, whose rate grows "
        "exponentially from lr_find_start to learning_rate over its steps and which ends "
        "when the loss explodes (see `lr-find`).",
        choices=RUN_KINDS,
    )
    lr_find_start: float = _run_field(
        "float",
        1e-7,
        "The first learning rate of an lr_find run (below its learning_rate).",
        low=1e-12,
        high=100.0,
    )
    dp_clip: float | None = _run_field(
        "float",
        None,
        "Differentially private training (DP-SGD): clip each example's gradient to this L2 "
        "norm C, add Gaussian noise of standard deviation dp_noise·C to their sum, divide "
        "by batch_size; batches are Poisson samples at rate batch_size / n, and the privacy "
        "spent, ε at dp_delta, is logged live as dp_epsilon (empty: off).",
        low=0.0,
        high=1000.0,
        low_open=True,
        optional=True,
    )
    dp_noise: float = _run_field(
        "float",
        1.0,
        "DP-SGD's noise multiplier σ: the noise's standard deviation in units of dp_clip.",
        low=0.0,
        high=1000.0,
    )
    dp_delta: float = _run_field(
        "float",
        1e-5,
        "DP-SGD's δ, the ε of dp_epsilon is at: keep it well below 1/n.",
        low=0.0,
        high=1.0,
        low_open=True,
        high_open=True,
    )
    dp_epsilon_budget: float | None = _run_field(
        "float",
        None,
        "Stop a DP-SGD run before a step would spend more than this ε (empty: no budget).",
        low=0.0,
        high=1000.0,
        low_open=True,
        optional=True,
    )
    dp_accountant: str = _run_field(
        "choice",
        "rdp",
        "How DP-SGD's ε is counted: rdp (Rényi DP, cheap) or pld (privacy loss "
        "distributions, tighter).",
        choices=("rdp", "pld"),
    )
    num_cpus: float = _run_field(
        "float",
        1.0,
        "CPUs the run asks of a Ray cluster (an engine with a Ray address places it on a "
        "node that has them free); an engine without one ignores it.",
        low=0.0,
        high=1024.0,
    )
    num_gpus: float = _run_field(
        "float",
        0.0,
        "GPUs the run asks of a Ray cluster (fractions share one); an engine without one "
        "ignores it.",
        low=0.0,
        high=64.0,
    )

    def __post_init__(self) -> None:
        for key, value in _check(asdict(self)).items():
            object.__setattr__(self, key, value)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> RunConfig:
        """Validates `values`; missing fields take their defaults.

        Raises `InvalidInput` whose `errors` map every bad field to the reason.
        """
        if not isinstance(values, Mapping):
            raise InvalidInput({"config": f"must be a mapping (got {values!r})"})
        errors = {key: "unknown field" for key in values if key not in FIELD_NAMES}
        known = {key: value for key, value in values.items() if key in FIELD_NAMES}
        try:
            config = cls(**known)  # validated once, in __post_init__
        except InvalidInput as exc:
            errors |= exc.errors
        if errors:
            raise InvalidInput(errors)
        return config

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        try:
            values = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidInput({"config": f"is not valid JSON: {exc}"}) from None
        if not isinstance(values, dict):
            raise InvalidInput({"config": "must be a JSON object"})
        return cls.from_dict(values)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values; `from_dict(to_dict())` gives an equal config."""
        values = asdict(self)
        values["hyperparameters"] = {
            key: [rule.to_dict() for rule in value] if key == "layer_rules" else value
            for key, value in self.hyperparameters.items()
        }
        values["task_weights"] = dict(self.task_weights)
        values["knob_schedule"] = [dict(entry) for entry in self.knob_schedule]
        return values

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def replace(self, **changes: Any) -> RunConfig:
        """A validated copy with `changes` applied."""
        return RunConfig.from_dict({**self.to_dict(), **changes})

    @property
    def batch_seed(self) -> int:
        """The seed of the batch order: `data_seed`, else `seed`."""
        return self.seed if self.data_seed is None else self.data_seed

    @property
    def label(self) -> str:
        """The name, or the optimizer, model and dataset (a file by its own name, not the
        server's path to it: the label is shown to a room)."""
        return self.name or f"{self.optimizer} · {self.model} · {shown_name(self.dataset)}"


#: The run fields as `Knob`s, in `RunConfig`'s order: what validation, forms and the CLI
#: read their ranges, help and defaults from.
FIELDS: tuple[Knob, ...] = tuple(
    Knob(f.name, **f.metadata[KNOB]) for f in dataclasses.fields(RunConfig) if KNOB in f.metadata
)
DEFAULTS: dict[str, Any] = {f.name: f.default for f in FIELDS}
FIELD_NAMES = tuple(f.name for f in dataclasses.fields(RunConfig))
#: Each instrument's interval field, in the order of `INSTRUMENTS`.
INSTRUMENT_FIELDS = tuple(f"{name}_every" for name in INSTRUMENTS)
if missing := sorted(name for name in INSTRUMENT_FIELDS if name not in DEFAULTS):
    raise TypeError(f"RunConfig lacks the interval field of an instrument: {', '.join(missing)}")


def instrument_intervals(config: RunConfig, total_steps: int) -> dict[str, int]:
    """Each instrument's interval in steps for a run of `total_steps` (0: off; all off
    without telemetry, of which they are part).

    An interval the config leaves empty is scaled to the run's length: an instrument
    measures every `spacing`·N steps, N = ⌈total / MEASUREMENTS_PER_RUN⌉ rounded up to a
    multiple of `log_every` (they measure on logged steps): alpha, the noise scale and the
    histograms every N, sharpness (the costly one) every 4N; so a short demo shows every
    instrument and a long run pays a bounded share. A DP-SGD run leaves those that read
    its training data beside the private gradient (`NOT_PRIVATE`) off. Intervals that
    are multiples of one N make the steps where instruments are due come in few kinds,
    and the training step is traced once per kind.
    """
    base = math.ceil(total_steps / MEASUREMENTS_PER_RUN)
    base = max(1, math.ceil(base / config.log_every)) * config.log_every
    intervals = {}
    for name, instrument in INSTRUMENTS.items():
        every = getattr(config, f"{name}_every")
        if every is None:
            every = 0 if private(config) and name in NOT_PRIVATE else base * instrument.spacing
        intervals[name] = every if config.telemetry else 0
    return intervals


def private(config: RunConfig) -> bool:
    """Whether `config` trains with DP-SGD."""
    return config.dp_clip is not None


def warnings(config: RunConfig) -> list[str]:
    """What `config` allows but should not be, each naming its field: a DP-SGD run's δ
    of at least 1/n (n the training split's size), which a mechanism that publishes one
    example outright meets."""
    if not private(config):
        return []
    examples = data.dataset_catalog.info(config.dataset, data_dir=config.data_dir).train_size
    if config.dp_delta * examples < 1:
        return []
    return [
        f"dp_delta: {number(config.dp_delta)} is not below 1/n = 1/{examples:,} (n = "
        f"{examples:,} training examples of {config.dataset}): take a δ well below 1/n, e.g. "
        f"{number(10.0 ** math.floor(math.log10(0.1 / examples)))}, for ε to mean something"
    ]


def fields(
    specs: Sequence[OptimizerSpec] | None = None, *, plugins: bool = True
) -> tuple[Knob, ...]:
    """The run fields, with the optimizer field's choices filled from `specs` (default:
    every optimizer, plugins included), and the model's and dataset's with the plugins'
    if `plugins`."""
    choices = {
        "optimizer": tuple(s.name for s in (optimizer_catalog.specs() if specs is None else specs)),
        "model": tuple(m.name for m in models.catalog(plugins=plugins)),
        "dataset": tuple(d.name for d in data.catalog(plugins=plugins)),
    }
    return tuple(
        dataclasses.replace(f, choices=choices[f.name]) if f.name in choices else f for f in FIELDS
    )


def run_fields(specs: Sequence[OptimizerSpec] | None = None) -> dict[str, Knob]:
    """`fields(specs)` by name: what forms are built from (the choices are read anew, so
    that a plugin loaded since shows)."""
    return {knob.name: knob for knob in fields(specs)}


def _check(values: Mapping[str, Any]) -> dict[str, Any]:
    """Every field of `values` validated, defaults filled; raises listing all errors."""
    errors: dict[str, str] = {}
    checked: dict[str, Any] = {}
    for knob in FIELDS:
        value = values.get(knob.name, knob.default)
        try:
            if knob.name == "optimizer":  # a built-in name does not load the plugins
                checked[knob.name] = optimizer_catalog.get_spec(value).name
            elif knob.name == "dataset" and value not in knob.choices:
                # A file or a TFDS dataset (read and checked here), or a plugin's.
                data_dir = values.get("data_dir")
                data_dir = data_dir if isinstance(data_dir, str) else None  # checked below
                checked[knob.name] = data.dataset_catalog.info(value, data_dir=data_dir).name
            elif knob.name == "model" and value not in knob.choices:
                checked[knob.name] = models.model_catalog.info(value).name  # a plugin's
            else:
                checked[knob.name] = knob.validate(value)
        except InvalidInput:
            names = ", ".join(spec.name for spec in optimizer_catalog.specs())
            errors[knob.name] = f"must be one of {names} (got {value!r})"
        except ValueError as exc:
            errors[knob.name] = str(exc).removeprefix(f"{knob.name}: ")

    plugin_model = (
        "model" in checked and models.model_catalog.info(checked["model"]).source != "core"
    )
    if checked.get("multitask") and plugin_model:
        errors["multitask"] = f"needs a built-in model; {checked['model']} has one head"
    dataset = None
    if "dataset" in checked and "data_dir" in checked:
        dataset = data.dataset_catalog.info(checked["dataset"], data_dir=checked["data_dir"])
    if dataset is not None and checked.get("multitask") and dataset.problem == "regression":
        errors["multitask"] = f"needs a classification; {checked['dataset']} is a regression"
    if dataset is not None and "model" in checked:
        shape = dataset.input_shape
        if models.model_catalog.info(checked["model"]).images and len(shape) != 3:
            errors["model"] = (
                f"{checked['model']} needs images; {checked['dataset']} has examples of shape "
                f"{shape}: take mlp"
            )
    for name in ("batch_size", "sharpness_examples"):
        count = checked.get(name)
        if dataset is not None and count is not None and count > dataset.train_size:
            errors[name] = (
                f"must be at most the training split of {checked['dataset']}, "
                f"{dataset.train_size:,} examples (got {count:,})"
            )

    every, log_every = checked.get("per_layer_every"), checked.get("log_every")
    if every is not None and log_every is not None and every % log_every:
        errors["per_layer_every"] = (
            f"must be a multiple of log_every, {log_every} (got {every}): statistics are "
            "recorded on logged steps"
        )

    errors |= _privacy_errors(checked)

    hyperparameters = values.get("hyperparameters")
    hyperparameters = {} if hyperparameters is None else hyperparameters
    if not isinstance(hyperparameters, Mapping):
        errors["hyperparameters"] = "must be a mapping of optimizer knobs"
    elif "telemetry" in hyperparameters:
        errors["telemetry"] = "is a run field, not an optimizer hyperparameter"
    elif "optimizer" in checked:
        try:
            spec = optimizer_catalog.get_spec(checked["optimizer"])
            checked["hyperparameters"] = spec.validate(hyperparameters)
        except InvalidInput as exc:
            errors |= exc.errors

    if "hyperparameters" in checked:
        spec = optimizer_catalog.get_spec(checked["optimizer"])
        schedule, reason = checked_schedule(
            values.get("knob_schedule"), spec.knobs, checked["hyperparameters"]
        )
        if reason:
            errors["knob_schedule"] = reason
        checked["knob_schedule"] = schedule

    rate = checked.get("hyperparameters", {}).get("learning_rate")
    start = checked.get("lr_find_start")
    range_test = checked.get("kind") == LR_FIND and start is not None
    if range_test and isinstance(rate, float) and start >= rate:
        errors["lr_find_start"] = f"must be below learning_rate, {rate:g} (got {start:g})"

    weights = values.get("task_weights", dict.fromkeys(TASKS, 1.0))
    reason = _task_weights_error(weights)
    if reason:
        errors["task_weights"] = reason
    else:
        checked["task_weights"] = {task: float(weights.get(task, 1.0)) for task in TASKS}

    if errors:
        raise InvalidInput(errors)
    return checked


#: The instruments that read the training batch beside its private gradient (again, in
#: halves, or at both ends of the step): what they would log is not covered by DP-SGD's ε.
NOT_PRIVATE = ("alpha", "sharpness", "noise_scale")


def _privacy_errors(checked: Mapping[str, Any]) -> dict[str, str]:
    """What a DP-SGD run (`dp_clip` set) cannot be: another run kind, float16's loss
    scaling (its per-example gradients would be scaled), or measured by an instrument that
    reads the training data beside the private gradient (whose values ε does not cover)."""
    if checked.get("dp_clip") is None:
        return {}
    errors = {}
    if checked.get("kind") == LR_FIND:
        errors["kind"] = "must be train for a DP-SGD run (dp_clip is set)"
    if checked.get("precision") == "mixed_float16":
        errors["precision"] = "must be float32 or mixed_bfloat16 for a DP-SGD run (dp_clip is set)"
    for name in NOT_PRIVATE:
        if checked.get(f"{name}_every"):
            errors[f"{name}_every"] = (
                "must be 0 or empty for a DP-SGD run (dp_clip is set): it reads the training "
                "data beside the private gradient, which ε does not cover"
            )
    return errors


def _task_weights_error(weights: Any) -> str | None:
    if not isinstance(weights, Mapping) or set(weights) - set(TASKS):
        return f"must map {' and '.join(TASKS)} to weights"
    for value in weights.values():
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"weights must be numbers (got {value!r})"
        if not 0 <= value <= 1000:  # also refuses NaN; ints too big for a float compare fine
            return f"weights must be in [0, 1000] (got {value!r})"
    if not any(weights.get(task, 1.0) for task in TASKS):
        return "at least one weight must be above 0"
    return None
