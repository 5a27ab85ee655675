"""How stages compose: the step's state, what a stage is, and the check of an order.

A stage is a transformation of the step's state (`Step`): it declares the fields it
`reads` and the fields it `writes`, and `apply` returns new values for the latter
(`Written`). `chain` checks an order of stages when it is made: a stage that reads a field
which neither the step's initial state nor a stage before it provides is refused
(`ChainError`, naming both). `run` holds every stage to its declaration as the step is
traced: a stage sees only the fields it reads, and may return only those it writes.

What a stage may use of its optimizer is `StageHost`, not the optimizer itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeAlias, TypedDict, runtime_checkable

from core.knobs import Knob

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

#: A new value for one of the optimizer's variables (a slot, a residual, a statistic, a
#: parameter): the step returns them all, and the optimizer writes them through the strategy.
Assignment: TypeAlias = "tuple[tf.Variable, tf.Tensor]"


class ChainError(ValueError):
    """Stages that do not hold together: one reads a field that no stage before it writes,
    or reads or writes a field it does not declare."""


class Written(TypedDict, total=False):
    """What a stage's `apply` returns: a new value for each field it `writes`. The values of
    `stats` and `assignments` are added to what the stages before it wrote; the others
    replace the field's value."""

    grads: Sequence[tf.Tensor]
    steps: Sequence[tf.Tensor]
    multipliers: Sequence[float]
    new_params: Sequence[tf.Tensor]
    stats: Mapping[str, tf.Tensor]
    assignments: Sequence[Assignment]


class Step:
    """One step's state, as the stages pass it on. Read-only: a stage returns what it
    changes (`Written`).

    Attributes:
        grads: The gradients (all-reduced), transformed by the stages before the algorithm.
        params: The parameters θ before the step.
        variables: The variables themselves.
        rows: For a variable updated by rows, the indices of its rows that the gradient
            touches, each once: its `grads`, `params` and `new_params` hold those rows
            only (every other row keeps its value). None for a variable updated whole.
        indices: Each variable's index among the optimizer's variables.
        lr: The learning rate η.
        steps: The proposed steps Δ, once the algorithm has run.
        multipliers: Each variable's step multiplier (layer rules; 1 when none applies).
        new_params: The new parameters θ', once the decay stage has formed them.
        stats: The statistics measured so far (see `Stage.stats`).
        assignments: New values for state variables (slots, residuals, statistics).
    """

    # The fields live in `_fields`, read through `__getattr__`: a stage's view holds the
    # fields it declares and no other, so an undeclared read fails where it is made.
    __slots__ = ("_fields", "_reader")
    _fields: Mapping[str, Any]
    _reader: str | None  # the stage whose view it is, if any

    grads: Sequence[tf.Tensor]
    params: Sequence[tf.Tensor]
    variables: Sequence[tf.Variable]
    rows: Sequence[tf.Tensor | None]
    indices: Sequence[int]
    lr: tf.Tensor
    steps: Sequence[tf.Tensor]
    multipliers: Sequence[float]
    new_params: Sequence[tf.Tensor]
    stats: Mapping[str, tf.Tensor]
    assignments: Sequence[Assignment]

    def __init__(self, reader: str | None = None, **fields: Any) -> None:
        unknown = set(fields) - set(FIELDS)
        if unknown:
            raise TypeError(f"Step has no field {', '.join(sorted(unknown))}")
        # Tuples and read-only mappings: a stage cannot change a field in place.
        frozen = {name: _read_only(value) for name, value in fields.items()}
        object.__setattr__(self, "_fields", frozen)
        object.__setattr__(self, "_reader", reader)

    def __getattr__(self, name: str) -> Any:
        if name in self._fields:
            return self._fields[name]
        if name in FIELDS and self._reader is not None:
            raise ChainError(f"{self._reader} reads `{name}` without declaring it in `reads`")
        if name in FIELDS:
            raise ChainError(f"no stage has written `{name}` yet")
        raise AttributeError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Step is read-only: a stage returns the fields it writes")

    @classmethod
    def start(cls, **fields: Any) -> Step:
        """The state before the first stage: the fields of `INITIAL`, with no statistics
        and no assignments yet."""
        return cls(**{"stats": {}, "assignments": ()} | fields)

    def seen_by(self, stage: Stage) -> Step:
        """The fields `stage` reads, and no other."""
        fields = self._fields
        return Step(type(stage).__name__, **{name: fields[name] for name in stage.reads})

    def after(self, stage: Stage, written: Written) -> Step:
        """The state once `stage` has written `written`."""
        undeclared = set(written) - set(stage.writes)
        if undeclared:
            names = ", ".join(f"`{name}`" for name in sorted(undeclared))
            raise ChainError(f"{type(stage).__name__} writes {names} without declaring it")
        fields = dict(self._fields)
        value: Any
        for name, value in written.items():
            if name == "stats":
                value = {**fields["stats"], **value}
            elif name == "assignments":
                value = (*fields["assignments"], *value)
            fields[name] = value
        return Step(**fields)


#: The fields of the step's state, as `Step` lists them.
FIELDS: tuple[str, ...] = tuple(name for name in Step.__annotations__ if name[0] != "_")
#: The fields the optimizer fills before the first stage (no statistics or assignments yet).
INITIAL: tuple[str, ...] = (
    "grads",
    "params",
    "variables",
    "rows",
    "indices",
    "lr",
    "stats",
    "assignments",
)
#: The fields a stage may write.
WRITABLE: tuple[str, ...] = tuple(Written.__annotations__)
#: The fields the optimizer reads of the last state: it writes them.
RESULT: tuple[str, ...] = ("new_params", "assignments")


def _read_only(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, dict):
        return MappingProxyType(value)
    return value


@runtime_checkable
class StageHost(Protocol):
    """What a stage may use of the optimizer it is part of (`LabOptimizer` is one).

    Attributes:
        telemetry: Whether the optimizer records its statistics (a constructor argument).
        per_variable_stats: With telemetry, whether the step being traced also measures
            the per-variable statistics: a bool, or a boolean tensor known as the step
            runs (one trace for steps with them and without; zeros without).
    """

    telemetry: bool
    per_variable_stats: Any

    @property
    def row_local(self) -> bool:
        """Whether the algorithm's step may be computed on the rows a gradient touches."""

    @property
    def iterations(self) -> Any:
        """The optimizer's step counter, from 0."""

    @property
    def live_variables(self) -> Mapping[str, Any]:
        """The variables of the live knobs that are on, by knob name."""

    def add_variable(
        self, shape: tuple[int, ...], *, dtype: str, aggregation: str, name: str
    ) -> keras.Variable:
        """A new variable of the optimizer's (saved with it, mirrored under a strategy)."""

    def add_optimizer_variables(
        self, trainable_variables: list[keras.Variable], name: str
    ) -> list[keras.Variable]:
        """One new variable of the optimizer's like each of `trainable_variables`."""

    def uses_weight_decay(self, variable: keras.Variable) -> bool:
        """Whether `exclude_from_weight_decay` leaves `variable` to decay."""

    def propose_all(
        self,
        grads: Sequence[tf.Tensor],
        params: Sequence[tf.Tensor],
        indices: Sequence[int],
        learning_rate: tf.Tensor,
    ) -> tuple[list[tf.Tensor], list[Assignment]]:
        """The algorithm: the proposed steps Δ and the new values of its state."""


class Stage:
    """One part of the step: a transformation of the step's state.

    Attributes:
        reads: The fields of `Step` that `apply` reads.
        writes: The fields of `Step` that `apply` returns (see `Written`).
        knobs: The knobs it reads, declared here.
        formula, note: Its line of the update rule, and what the line's symbols are.
        label: Its name in the one-line order (`order_line`).
        stats: The scalar statistics it reports with `telemetry=True`, each with its value
            while the stage is off (None: measured whenever telemetry is on).
    """

    reads: ClassVar[tuple[str, ...]] = ()
    writes: ClassVar[tuple[str, ...]] = ()
    knobs: ClassVar[tuple[Knob, ...]] = ()
    formula: ClassVar[str] = ""
    note: ClassVar[str] = ""
    label: ClassVar[str] = ""
    stats: ClassVar[Mapping[str, float | None]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A stage without a docstring gets its line of the update rule as one."""
        super().__init_subclass__(**kwargs)
        if cls.__doc__ is None and cls.formula:
            cls.__doc__ = f"{cls.formula}    ({cls.note})"

    def __init__(
        self, host: StageHost, values: Mapping[str, Any], order: Sequence[type[Stage]]
    ) -> None:
        """A stage of `host`'s step.

        Args:
            host: The optimizer, as far as a stage may use it.
            values: Every knob's validated value, by name.
            order: The stages of the step, in order (`Telemetry` records the statistics
                they declare).
        """
        self.host = host
        self.values = values
        self.order = order

    def build(self, var_list: Sequence[keras.Variable]) -> None:
        """Creates what the stage keeps across steps (variables, per-variable settings)."""

    def apply(self, step: Step) -> Written:
        """The new values of the fields it writes (in the traced step)."""
        raise NotImplementedError

    def row_local(self, index: int) -> bool:
        """Whether the stage, as set, acts on the variable of optimizer index `index` row
        by row and leaves the rows whose gradient is zero as they are (see `Step.rows`):
        true of one that is off."""
        return True

    def live(self, name: str) -> Any:
        """The variable of the live knob `name`, or None when the knob is off."""
        return self.host.live_variables.get(name)


def chain(*stages: type[Stage]) -> tuple[type[Stage], ...]:
    """The stages, in this order, once checked: each reads only fields that the step's
    initial state (`INITIAL`) or a stage before it provides, writes only fields a stage
    may write (`WRITABLE`), and appears once; the last state holds `RESULT`.

    Raises:
        ChainError: Naming the stage and the field.
    """
    provided = set(INITIAL)
    for position, stage in enumerate(stages):
        name = stage.__name__
        if stage in stages[:position]:
            raise ChainError(f"{name} is in the chain twice")
        for field in (*stage.reads, *stage.writes):
            if field not in FIELDS:
                raise ChainError(f"{name} declares `{field}`, which is not a field of Step")
        for field in stage.writes:
            if field not in WRITABLE:
                raise ChainError(f"{name} writes `{field}`, which only the optimizer writes")
        for field in stage.reads:
            if field not in provided:
                later = [s.__name__ for s in stages[position + 1 :] if field in s.writes]
                after = f" ({later[0]} writes it, after {name})" if later else ""
                raise ChainError(f"{name} reads `{field}`, which no stage before it writes{after}")
        provided |= set(stage.writes)
    for field in RESULT:
        if field not in provided:
            raise ChainError(f"the optimizer writes `{field}` after the chain; no stage writes it")
    return stages


def run(stages: Sequence[Stage], step: Step) -> Step:
    """`step` passed through `stages` in order: each sees the fields it reads, and what it
    writes makes the state the next one sees."""
    for stage in stages:
        step = step.after(stage, stage.apply(step.seen_by(stage)))
    return step


def neutral_stats(stages: Sequence[type[Stage]]) -> dict[str, float | None]:
    """The scalar statistics of `stages`, in their order, each with its value while its
    stage is off."""
    return {name: value for stage in stages for name, value in stage.stats.items()}
