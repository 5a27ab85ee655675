"""The knobs every optimizer has, as the stages of one step, in the order they act.

After Optax's `chain`: each stage is a small class with its knobs, the line of the update
rule it contributes, the statistics it reports (with their value while it is off), and
`apply`, which transforms the step's state. `LabOptimizer` runs `STAGES` in order, once
per step, on all trainable variables at once; `COMMON_KNOBS`, `SCALAR_STATS` and the order
shown in the docstrings, the README and the Optimizers page are made from the list. A new
knob is one stage here, and its place in `STAGES`.

A stage whose knob is `None` does nothing and is not traced. A variable with a sparse
gradient (an embedding's `tf.IndexedSlices`) is updated by rows when every stage acts on it
row by row (`Stage.row_local`): the step then holds only the rows the gradient touches, and
writes them back with a scatter, as Keras's own SGD does, instead of a whole table each step.

This module imports TensorFlow only when a step is traced (inside `apply`), so that the
catalog of optimizers, and the dashboard, can list the knobs without it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from core.knobs import Knob, LayerRule

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

    from core.optimizers.lab_optimizer import Assignment, LabOptimizer


@dataclass
class Step:
    """One step's state as it passes through the stages.

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

    grads: list[tf.Tensor]
    params: list[tf.Tensor]
    variables: list[tf.Variable]
    rows: list[tf.Tensor | None]
    indices: list[int]
    lr: tf.Tensor
    steps: list[tf.Tensor] = field(default_factory=list)
    multipliers: list[float] = field(default_factory=list)
    new_params: list[tf.Tensor] = field(default_factory=list)
    stats: dict[str, tf.Tensor] = field(default_factory=dict)
    assignments: list[Assignment] = field(default_factory=list)


class Stage:
    """One part of the step.

    Attributes:
        knobs: The knobs it reads, declared here.
        formula, note: Its line of the update rule, and what the line's symbols are.
        label: Its name in the one-line order (`order_line`).
        stats: The scalar statistics it reports with `telemetry=True`, each with its value
            while the stage is off (None: measured whenever telemetry is on).
    """

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

    def __init__(self, optimizer: LabOptimizer, values: Mapping[str, Any]) -> None:
        self.optimizer = optimizer
        self.values = values  # every knob's validated value

    def build(self, var_list: Sequence[keras.Variable]) -> None:
        """Creates what the stage keeps across steps (variables, per-variable settings)."""

    def apply(self, step: Step) -> None:
        """Transforms `step` (in the traced step)."""
        raise NotImplementedError

    def row_local(self, index: int) -> bool:
        """Whether the stage, as set, acts on the variable of optimizer index `index` row
        by row and leaves the rows whose gradient is zero as they are (see `Step.rows`):
        true of one that is off."""
        return True

    def live(self, name: str) -> Any:
        """The variable of the live knob `name`, or None when the knob is off."""
        return self.optimizer.live_variables.get(name)


class ClipNorm(Stage):
    knobs = (
        Knob(
            "clip_norm",
            "float",
            None,
            "Clip the global norm of all gradients together (after the all-reduce) to this value.",
            low=0.0,
            high=1e6,
            low_open=True,
            optional=True,
            live=True,
            log_scale=True,
        ),
    )
    formula = "g  ← g · min(1, c / ‖g‖)"
    note = "clip_norm c, ‖·‖ over all gradients"
    label = "`clip_norm`"
    stats: ClassVar[Mapping[str, float | None]] = {
        "grad_norm": None,
        "grad_norm_clipped": None,
        "clip_active": 0.0,
    }

    def apply(self, step: Step) -> None:
        import tensorflow as tf

        from core.optimizers import transforms

        clip_norm = self.live("clip_norm")
        if self.optimizer.telemetry or clip_norm is not None:
            norm = transforms.replica_mean(transforms.global_norm(step.grads))
            step.stats["grad_norm"] = step.stats["grad_norm_clipped"] = norm
        if clip_norm is not None:
            clip_norm = tf.convert_to_tensor(clip_norm)
            scale = transforms.ball_scale(step.stats["grad_norm"], clip_norm)
            step.grads = transforms.scale_all(step.grads, scale)
            step.stats["grad_norm_clipped"] = step.stats["grad_norm"] * scale
            step.stats["clip_active"] = step.stats["grad_norm"] > clip_norm


class GradientNoise(Stage):
    knobs = (
        Knob(
            "noise_std",
            "float",
            None,
            "Standard deviation of Gaussian noise added to the clipped gradient, before η "
            "scales it.",
            low=0.0,
            high=100.0,
            optional=True,
            live=True,
        ),
        Knob("noise_seed", "int", 0, "Seed of the gradient noise.", low=0, high=2**31 - 1),
    )
    formula = "g  ← g + σ·ξ,  ξ ~ N(0, I)"
    note = "noise_std σ (a standard deviation)"
    label = "`noise_std`"

    def row_local(self, index: int) -> bool:
        return self.live("noise_std") is None  # noise lands on every row

    def apply(self, step: Step) -> None:
        import tensorflow as tf

        from core.optimizers import transforms

        if (std := self.live("noise_std")) is None:
            return
        std, seed = tf.convert_to_tensor(std), self.values["noise_seed"]
        t = self.optimizer.iterations
        step.grads = [
            g + tf.cast(std, g.dtype) * transforms.gradient_noise(g.shape, g.dtype, seed, t, i)
            for g, i in zip(step.grads, step.indices, strict=True)
        ]


class TopK(Stage):
    knobs = (
        Knob(
            "top_k",
            "float",
            None,
            "Keep only this fraction of each gradient tensor's entries, the largest by magnitude.",
            low=0.0,
            high=1.0,
            low_open=True,
            optional=True,
        ),
        Knob(
            "top_k_error_feedback",
            "bool",
            False,
            "Carry the entries top-k dropped over to the next step's gradient.",
        ),
    )
    formula = "k  ← topk(g + e);  e ← g + e − k;  g ← k"
    note = "top_k per tensor; e only with error feedback"
    label = "`top_k`"
    stats: ClassVar[Mapping[str, float | None]] = {"top_k_kept": 1.0}

    def row_local(self, index: int) -> bool:
        return self.values["top_k"] is None  # the largest entries of the whole tensor

    def build(self, var_list: Sequence[keras.Variable]) -> None:
        feedback = self.values["top_k"] is not None and self.values["top_k_error_feedback"]
        self.residuals = (
            self.optimizer.add_optimizer_variables(list(var_list), "top_k_residual")
            if feedback
            else []
        )

    def apply(self, step: Step) -> None:
        import tensorflow as tf

        from core.optimizers import transforms

        if (fraction := self.values["top_k"]) is None:
            return
        kept = []
        for g, i in zip(step.grads, step.indices, strict=True):
            if self.residuals:
                residual = transforms.tf_variable(self.residuals[i])
                g = g + tf.convert_to_tensor(residual)
                sparse = transforms.keep_top_k(g, fraction)
                step.assignments.append((residual, g - sparse))
            else:
                sparse = transforms.keep_top_k(g, fraction)
            kept.append(sparse)
        sizes = [g.shape.num_elements() for g in step.grads]
        fraction_kept = sum(transforms.top_k_count(n, fraction) for n in sizes) / sum(sizes)
        step.grads = kept
        step.stats["top_k_kept"] = tf.constant(fraction_kept, tf.float32)


class CoupledL2(Stage):
    """g ← g + λ·θ: an L2 penalty (λ/2)·‖θ‖² in the gradient, before the algorithm, so
    that Adam rescales it with the gradient. This is the "Adam with L2" that decoupled
    `weight_decay` is measured against (Loshchilov & Hutter, ICLR 2019), PyTorch's
    `Adam(weight_decay=λ)`; for plain SGD the two are the same."""

    knobs = (
        Knob(
            "l2",
            "float",
            None,
            "Coupled L2 regularization λ: g ← g + λ·θ before the algorithm (Adam then "
            "rescales it; compare decoupled weight_decay).",
            low=0.0,
            high=10.0,
            optional=True,
            live=True,
            log_scale=True,
        ),
    )
    formula = "g  ← g + λ₂·θ"
    note = "l2 λ₂ (coupled L2, before the algorithm)"
    label = "coupled `l2`"

    def row_local(self, index: int) -> bool:
        return self.live("l2") is None  # the penalty's gradient is on every row

    def apply(self, step: Step) -> None:
        import tensorflow as tf

        if (l2 := self.live("l2")) is None:
            return
        l2 = tf.convert_to_tensor(l2)
        step.grads = [
            g + tf.cast(l2, g.dtype) * theta
            for g, theta in zip(step.grads, step.params, strict=True)
        ]


class Algorithm(Stage):
    """The optimizer's own step (`LabOptimizer.propose_all`), which includes −η."""

    knobs = (
        Knob(
            "learning_rate",
            "float",
            0.01,
            "Step size η.",
            low=0.0,
            high=100.0,
            low_open=True,
            live=True,
            log_scale=True,
        ),
    )
    formula = "Δ  ← algorithm(g)"
    note = "the subclass's step (it includes −η)"
    label = "the algorithm's step"

    def row_local(self, index: int) -> bool:
        return self.optimizer.row_local

    def apply(self, step: Step) -> None:
        step.steps, assignments = self.optimizer.propose_all(
            step.grads, step.params, step.indices, step.lr
        )
        step.assignments += assignments


class LayerMultiplier(Stage):
    knobs = (
        Knob(
            "layer_rules",
            "rules",
            (),
            "Per-layer step multiplier and weight decay, chosen by a regex on the variable path.",
        ),
    )
    formula = "Δ  ← m_l · Δ"
    note = "layer_rules step multiplier m_l"
    label = "`layer_rules` multiplier"

    def build(self, var_list: Sequence[keras.Variable]) -> None:
        rules = [matching_rule(self.values["layer_rules"], v) for v in var_list]
        self.multipliers = [rule.lr_mult if rule else 1.0 for rule in rules]

    def apply(self, step: Step) -> None:
        step.multipliers = [self.multipliers[i] for i in step.indices]
        step.steps = [
            s if m == 1.0 else s * m for s, m in zip(step.steps, step.multipliers, strict=True)
        ]


class WeightDecay(Stage):
    knobs = (
        Knob(
            "weight_decay",
            "float",
            None,
            "Decoupled weight decay λ: θ ← θ − η·λ·θ each step (Loshchilov & Hutter).",
            low=0.0,
            high=10.0,
            optional=True,
            live=True,
            log_scale=True,
        ),
    )
    formula = "θ' ← θ − θ·λ_l·η·m_l + Δ"
    note = "decoupled weight decay λ_l (layer_rules or weight_decay)"
    label = "decoupled `weight_decay`"

    def build(self, var_list: Sequence[keras.Variable]) -> None:
        """Each variable's decay: its layer rule's, else the optimizer-wide one (a
        variable, or None when off, or for the variables Keras's
        `exclude_from_weight_decay` named)."""
        everywhere = self.live("weight_decay")
        self.decays: list[Any] = []
        for variable in var_list:
            rule = matching_rule(self.values["layer_rules"], variable)
            if rule and rule.weight_decay is not None:
                self.decays.append(rule.weight_decay)
            else:
                # Keras's own test for it, as its AdamW uses.
                used = self.optimizer._use_weight_decay(variable)
                self.decays.append(everywhere if used else None)

    def row_local(self, index: int) -> bool:
        return self.decays[index] is None  # decay shrinks every row

    def apply(self, step: Step) -> None:
        import tensorflow as tf

        for theta, delta, i, m in zip(
            step.params, step.steps, step.indices, step.multipliers, strict=True
        ):
            new = theta
            if (decay := self.decays[i]) is not None:
                # Same expression as keras.optimizers.AdamW, so `adamw` matches it exactly.
                layer_lr = step.lr if m == 1.0 else step.lr * m
                new = theta - theta * tf.cast(decay, theta.dtype) * tf.cast(layer_lr, theta.dtype)
            step.new_params.append(new + delta)


class PruneMask(Stage):
    knobs = (
        Knob(
            "prune_threshold",
            "float",
            None,
            "Freeze parameters whose magnitude is below this value (their update is masked "
            "to zero).",
            low=0.0,
            high=10.0,
            optional=True,
            live=True,
        ),
    )
    formula = "θ' ← θ  where |θ| < τ"
    note = "prune_threshold τ: those entries are frozen"
    label = "`prune_threshold` mask"
    stats: ClassVar[Mapping[str, float | None]] = {"pruned_frozen": 0.0}

    def row_local(self, index: int) -> bool:
        return self.live("prune_threshold") is None  # it counts the frozen entries of all rows

    def apply(self, step: Step) -> None:
        import tensorflow as tf

        from core.optimizers import transforms

        if (threshold := self.live("prune_threshold")) is None:
            return
        masked, frozen_counts = [], []
        for theta, new in zip(step.params, step.new_params, strict=True):
            frozen = tf.abs(theta) < tf.cast(threshold, theta.dtype)
            masked.append(tf.where(frozen, theta, new))
            frozen_counts.append(tf.reduce_sum(tf.cast(frozen, tf.float32)))
        total = sum(p.shape.num_elements() for p in step.params)
        step.new_params = masked
        step.stats["pruned_frozen"] = transforms.replica_mean(tf.add_n(frozen_counts)) / total


class BallProjection(Stage):
    knobs = (
        Knob(
            "radius",
            "float",
            None,
            "After the step, project the whole parameter vector onto the L2 ball of this radius.",
            low=0.0,
            high=1e6,
            low_open=True,
            optional=True,
            live=True,
            log_scale=True,
        ),
    )
    formula = "θ' ← θ' · min(1, r / ‖θ'‖)"
    note = "radius r, ‖·‖ over all parameters"
    label = "`radius` projection"
    stats: ClassVar[Mapping[str, float | None]] = {
        "param_norm": None,
        "param_norm_proposed": None,
        "projection_active": 0.0,
    }

    def row_local(self, index: int) -> bool:
        return self.live("radius") is None  # it scales every row

    def apply(self, step: Step) -> None:
        import tensorflow as tf

        from core.optimizers import transforms

        radius = self.live("radius")
        if not self.optimizer.telemetry and radius is None:
            return
        squares = transforms.squared_norms(step.new_params)
        if any(rows is not None for rows in step.rows):  # and the rows such a step left
            squares += tf.stack(
                [
                    0.0
                    if rows is None
                    else tf.maximum(
                        transforms.squared_norm(variable) - transforms.squared_norm(old), 0
                    )
                    for old, variable, rows in zip(
                        step.params, step.variables, step.rows, strict=True
                    )
                ]
            )
        step.stats["param_sq"] = transforms.replica_mean(squares)
        step.stats["param_norm"] = tf.sqrt(tf.reduce_sum(step.stats["param_sq"]))
        step.stats["param_norm_proposed"] = step.stats["param_norm"]
        if radius is not None:
            radius = tf.convert_to_tensor(radius)
            scale = transforms.ball_scale(step.stats["param_norm"], radius)
            step.new_params = transforms.scale_all(step.new_params, scale)
            step.stats["projection_active"] = step.stats["param_norm"] > radius
            step.stats["param_norm"] = step.stats["param_norm"] * scale
            step.stats["param_sq"] = step.stats["param_sq"] * scale * scale


# Per-variable statistics, in the order of the variables the optimizer was built with.
VECTOR_STATS = (
    "step_sq",  # ‖θ' − θ‖² of each variable
    "param_sq",  # ‖θ'‖² of each variable
)


#: Not a knob: a constructor argument of every optimizer (and a run field), fixed for
#: the optimizer's life.
TELEMETRY = Knob(
    "telemetry",
    "bool",
    False,
    "Record gradient and parameter norms, clipping and projection activity each step.",
)


class Telemetry(Stage):
    """Records what the step did in the optimizer's `stats` (not part of the update), when
    the optimizer was made with `telemetry=True`."""

    def build(self, var_list: Sequence[keras.Variable]) -> None:
        def variable(name: str, shape: tuple[int, ...]) -> keras.Variable:
            return self.optimizer.add_variable(
                shape, dtype="float32", aggregation="only_first_replica", name=f"stat_{name}"
            )

        self.variables: dict[str, keras.Variable] = {}
        if self.optimizer.telemetry:
            self.variables = {name: variable(name, ()) for name in SCALAR_STATS}
            self.variables |= {name: variable(name, (len(var_list),)) for name in VECTOR_STATS}

    def apply(self, step: Step) -> None:
        import tensorflow as tf

        from core.optimizers import transforms

        if not self.variables:
            return
        vectors = VECTOR_STATS if self.optimizer.per_variable_stats else ()
        if vectors:
            step.stats["step_sq"] = transforms.replica_mean(
                transforms.squared_distances(step.new_params, step.params)
            )
        for name in SCALAR_STATS:  # a stage that is off reports its neutral value
            value = step.stats.get(name, NEUTRAL_STATS[name])
            step.assignments.append(
                (transforms.tf_variable(self.variables[name]), tf.cast(value, tf.float32))
            )
        size = self.variables["step_sq"].shape[0]
        positions = tf.constant(step.indices)[:, None]
        for name in vectors:
            vector = tf.scatter_nd(positions, step.stats[name], [size])
            step.assignments.append((transforms.tf_variable(self.variables[name]), vector))


def matching_rule(rules: Sequence[LayerRule], variable: Any) -> LayerRule | None:
    """The first rule whose pattern is found in the variable's path, if any."""
    path = getattr(variable, "path", variable.name)
    return next((rule for rule in rules if rule.regex.search(path)), None)


#: The step, in order. The all-reduce comes first, outside the stages (see `lab_optimizer`).
STAGES: tuple[type[Stage], ...] = (
    ClipNorm,
    GradientNoise,
    TopK,
    CoupledL2,
    Algorithm,
    LayerMultiplier,
    WeightDecay,
    PruneMask,
    BallProjection,
    Telemetry,
)
#: The knobs every optimizer accepts: the learning rate, then the others in step order.
COMMON_KNOBS: tuple[Knob, ...] = (
    *Algorithm.knobs,
    *(knob for stage in STAGES if stage is not Algorithm for knob in stage.knobs),
)
#: Scalar statistics recorded every step with `telemetry=True`, in `LabOptimizer.stats`.
SCALAR_STATS: tuple[str, ...] = tuple(name for stage in STAGES for name in stage.stats)
NEUTRAL_STATS: dict[str, float | None] = {
    name: value for stage in STAGES for name, value in stage.stats.items()
}
ALL_REDUCE = ("g  ← Σ_replicas g", "all-reduce, under `tf.distribute`", "all-reduce")


def order_text() -> str:
    """The update rule, one numbered line per stage, as in `lab_optimizer`'s docstring."""
    lines = [ALL_REDUCE[:2], *((s.formula, s.note) for s in STAGES if s.formula)]
    width = max(len(formula) for formula, _ in lines) + 4
    return "\n".join(
        f"{i}. {formula.ljust(width)}{note}" for i, (formula, note) in enumerate(lines, 1)
    )


def order_line() -> str:
    """The order in one line: `all-reduce → `clip_norm` → … → `radius` projection`."""
    return " → ".join([ALL_REDUCE[2], *(s.label for s in STAGES if s.formula)])
