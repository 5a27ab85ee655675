"""`LabOptimizer`: the base of every optimizer in the lab, and the order its knobs act in.

One optimizer step, for gradients g and parameters θ (all trainable variables at once):

    1. g  ← Σ_replicas g                           all-reduce, under `tf.distribute`
    2. g  ← g · min(1, c / ‖g‖)                    clip_norm c, ‖·‖ over all gradients
    3. g  ← g + σ·ξ,  ξ ~ N(0, I)                  noise_std σ (a standard deviation)
    4. k  ← topk(g + e);  e ← g + e − k;  g ← k    top_k per tensor; e only with error feedback
    5. Δ  ← algorithm(g)                           the subclass's step (it includes −η)
    6. Δ  ← m_l · Δ                                layer_rules step multiplier m_l
    7. θ' ← θ − θ·λ_l·η·m_l + Δ                    decoupled weight decay λ_l (layer_rules or
                                                   weight_decay)
    8. θ' ← θ  where |θ| < τ                       prune_threshold τ: those entries are frozen
    9. θ' ← θ' · min(1, r / ‖θ'‖)                  radius r, ‖·‖ over all parameters

Steps 2–4 and 9 need every gradient or every parameter at once. They run after the
all-reduce, on identical values in every replica, and every new value is written through
`strategy.extended.update`, so mirrored copies never drift apart. This is why the knobs
live here and not in Keras's `global_clipnorm`, which clips each replica's gradient before
the sum.

A knob set to `None` is left out of the traced step and costs nothing. A numeric knob that
is set lives in a variable: `set_knob` changes it for the next step without retracing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import keras
import numpy as np
import tensorflow as tf

from core.knobs import (
    COMMON_KNOBS,
    InvalidHyperparameters,
    Knob,
    LayerRule,
    live_change,
    validate,
)
from core.optimizers import transforms

Assignment = tuple[tf.Variable, tf.Tensor]

# Scalar statistics recorded every step when `telemetry=True`, in `LabOptimizer.stats`.
SCALAR_STATS = (
    "grad_norm",  # ‖g‖ after the all-reduce, before clipping
    "grad_norm_clipped",  # ‖g‖ after clipping
    "clip_active",  # 1 when clipping scaled the gradient down
    "top_k_kept",  # fraction of gradient entries top-k kept
    "pruned_frozen",  # fraction of parameters frozen by prune_threshold
    "param_norm",  # ‖θ'‖ after the whole step
    "param_norm_proposed",  # ‖θ'‖ before the projection (param_norm when radius is off)
    "projection_active",  # 1 when the projection scaled θ' down
)
# Per-variable statistics, in the order of the variables the optimizer was built with.
VECTOR_STATS = (
    "step_sq",  # ‖θ' − θ‖² of each variable
    "param_sq",  # ‖θ'‖² of each variable
)


def tf_variable(variable: Any) -> tf.Variable:
    """The `tf.Variable` (possibly distributed) behind a Keras variable."""
    return variable.value if isinstance(variable, keras.Variable) else variable


def _as_float(value: Any) -> float:
    """A float32 variable's value as the shortest float that reads back the same
    (0.004, not 0.004000000189989805), so configs round-trip cleanly."""
    return float(str(np.float32(value)))


def agreed(value: Any) -> Any:
    """`value` made the same in every replica: their mean, computed once.

    Reductions (norms, sums) that each replica computes on identical inputs may still
    differ in the last bit (multithreaded kernels add in varying order), and a scale
    derived from them would let mirrored copies drift apart. Outside a multi-replica step,
    `value` itself.
    """
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce("MEAN", value)


def _assign_all(strategy: tf.distribute.Strategy, assignments: Sequence[Assignment]) -> None:
    """Writes each value into its variable on every device, through the strategy."""
    for variable, value in assignments:
        strategy.extended.update(variable, _assign, args=(value,), group=False)


def _assign(variable: tf.Variable, value: tf.Tensor) -> tf.Operation:
    return variable.assign(tf.cast(value, variable.dtype))


class LabOptimizer(keras.optimizers.Optimizer):
    """Base class of the lab's optimizers: the knobs of `COMMON_KNOBS` on any algorithm.

    Subclasses declare their own knobs in `knobs` and write only the algorithm, either per
    variable (`propose`, with per-variable slots named in `slot_names`) or on the whole
    flattened parameter vector (see `GlobalVectorOptimizer`). The constructor takes every
    knob as a keyword argument, fills the knob's default for the ones not given, and
    raises `InvalidHyperparameters` naming every bad field.

    Args:
        learning_rate: A float > 0 (live) or a `keras.optimizers.schedules`
            `LearningRateSchedule`.
        name: The optimizer's name; its variables are created under it.
        **hyperparameters: Any other knob of the optimizer (see `knobs`).
    """

    knobs: ClassVar[tuple[Knob, ...]] = COMMON_KNOBS
    slot_names: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        learning_rate: float | keras.optimizers.schedules.LearningRateSchedule | None = None,
        *,
        name: str | None = None,
        **hyperparameters: Any,
    ) -> None:
        schedule = None
        if isinstance(learning_rate, keras.optimizers.schedules.LearningRateSchedule):
            schedule, learning_rate = learning_rate, None
        if learning_rate is not None:
            hyperparameters["learning_rate"] = learning_rate
        values = validate(self.knobs, hyperparameters, owner=type(self).__name__)
        # Keras applies its own weight decay and clipping when given them: it gets neither.
        super().__init__(learning_rate=schedule or values["learning_rate"], name=name)
        self._values = values
        self._live = {
            knob.name: self.add_variable(
                (),
                initializer=keras.initializers.Constant(values[knob.name]),
                dtype="float32",
                aggregation="only_first_replica",
                name=knob.name,
            )
            for knob in self.knobs
            if knob.live and knob.name != "learning_rate" and values[knob.name] is not None
        }
        self._stats: dict[str, keras.Variable] = {}

    # Knobs ----------------------------------------------------------------------------

    def get_knob(self, name: str) -> Any:
        """The current value of knob `name` (live knobs read their variable)."""
        if name == "learning_rate":
            return _as_float(tf.convert_to_tensor(self.learning_rate).numpy())
        if name in self._live:
            return _as_float(self._live[name].numpy())
        if name not in self._values:
            raise InvalidHyperparameters(
                {name: f"unknown hyperparameter for {type(self).__name__}"}
            )
        return self._values[name]

    def set_knob(self, name: str, value: float) -> float:
        """Changes a live knob from the next step on, without retracing.

        Raises `InvalidHyperparameters` naming the field when the value is invalid, the
        knob is not live, or it was off (`None`) when the optimizer was made.
        """
        was_on = name == "learning_rate" or name in self._live
        try:
            value = live_change(self.knobs, name, value, was_on=was_on)
        except ValueError as exc:
            raise InvalidHyperparameters({name: str(exc)}) from None
        if name == "learning_rate":
            self.learning_rate = value
        else:
            self._live[name].assign(value)
        return value

    @property
    def live_variables(self) -> dict[str, keras.Variable]:
        """The variables of the live knobs that are on, by knob name (learning rate first,
        unless it follows a schedule)."""
        lr = self._learning_rate
        first = {"learning_rate": lr} if isinstance(lr, keras.Variable) else {}
        return first | self._live

    @property
    def stats(self) -> dict[str, keras.Variable]:
        """What the last step measured (see `SCALAR_STATS`, `VECTOR_STATS`); empty unless
        the optimizer was made with `telemetry=True`."""
        return dict(self._stats)

    # Variables --------------------------------------------------------------------------

    def build(self, var_list: list[keras.Variable]) -> None:
        if self.built:
            return
        super().build(var_list)
        self._slots = self.build_slots(var_list)
        self._residuals = (
            self.add_optimizer_variables(var_list, "top_k_residual")
            if self._values["top_k"] is not None and self._values["top_k_error_feedback"]
            else []
        )
        self._rules = [self._rule_for(variable) for variable in var_list]
        if self._values["telemetry"]:
            self._stats = {name: self._add_stat(name, ()) for name in SCALAR_STATS}
            for name in VECTOR_STATS:
                self._stats[name] = self._add_stat(name, (len(var_list),))

    def build_slots(self, var_list: list[keras.Variable]) -> dict[str, list[keras.Variable]]:
        """Creates the algorithm's state; by default one slot per variable per `slot_names`."""
        return {name: self.add_optimizer_variables(var_list, name) for name in self.slot_names}

    def _add_stat(self, name: str, shape: tuple[int, ...]) -> keras.Variable:
        return self.add_variable(
            shape, dtype="float32", aggregation="only_first_replica", name=f"stat_{name}"
        )

    def _rule_for(self, variable: keras.Variable) -> tuple[float, float | keras.Variable | None]:
        """(step multiplier, weight decay) of `variable`: the first matching layer rule's,
        else 1 and the optimizer-wide decay (a variable, or `None` when off)."""
        path = getattr(variable, "path", variable.name)
        rule: LayerRule | None = next(
            (r for r in self._values["layer_rules"] if r.regex.search(path)), None
        )
        lr_mult = rule.lr_mult if rule else 1.0
        if rule and rule.weight_decay is not None:
            return lr_mult, rule.weight_decay
        return lr_mult, self._live.get("weight_decay")

    # The step -------------------------------------------------------------------------

    def _backend_update_step(
        self,
        grads: list[tf.Tensor],
        trainable_variables: list[keras.Variable],
        learning_rate: Any,
    ) -> None:
        # Keras calls this for the whole model at once, in replica context under a
        # strategy: reduce first, compute every new value, then write them all.
        variables = [tf_variable(v) for v in trainable_variables]
        pairs = list(zip(grads, variables, strict=True))
        context = tf.distribute.get_replica_context()
        # With one replica there is nothing to reduce, and TensorFlow's all-reduce would
        # register a gradient function per trace that it never frees.
        replicas = context.num_replicas_in_sync if context is not None else 1
        reduced = self._all_reduce_sum_gradients(pairs) if replicas > 1 else pairs
        indices = [self._get_variable_index(v) for v in trainable_variables]
        assignments = self._step([g for g, _ in reduced], variables, indices, learning_rate)
        tf.__internal__.distribute.interim.maybe_merge_call(
            _assign_all, self._distribution_strategy, assignments
        )

    def _step(
        self,
        grads: list[tf.Tensor],
        variables: list[tf.Variable],
        indices: list[int],
        learning_rate: Any,
    ) -> list[Assignment]:
        """Steps 2–9 of the module docstring, as new values for variables."""
        values, live = self._values, self._live
        stats: dict[str, tf.Tensor] = {}
        assignments: list[Assignment] = []
        lr = tf.cast(learning_rate, tf.float32)
        params = [tf.convert_to_tensor(v) for v in variables]
        grads = [tf.cast(g, p.dtype) for g, p in zip(grads, params, strict=True)]

        if values["telemetry"] or "clip_norm" in live:
            stats["grad_norm"] = stats["grad_norm_clipped"] = agreed(transforms.global_norm(grads))
        if "clip_norm" in live:
            clip_norm = tf.convert_to_tensor(live["clip_norm"])
            scale = transforms.ball_scale(stats["grad_norm"], clip_norm)
            grads = transforms.scale_all(grads, scale)
            stats["grad_norm_clipped"] = stats["grad_norm"] * scale
            stats["clip_active"] = stats["grad_norm"] > clip_norm

        if "noise_std" in live:
            std = tf.convert_to_tensor(live["noise_std"])
            step = self.iterations
            grads = [
                g
                + tf.cast(std, g.dtype)
                * transforms.gradient_noise(g.shape, g.dtype, values["noise_seed"], step, i)
                for g, i in zip(grads, indices, strict=True)
            ]

        if values["top_k"] is not None:
            grads, residual_assignments, kept = self._sparsify(grads, indices)
            assignments += residual_assignments
            stats["top_k_kept"] = kept

        steps, state_assignments = self.propose_all(grads, params, indices, lr)
        assignments += state_assignments
        new_params = self._apply_steps(params, steps, indices, lr, stats)

        if values["telemetry"] or "radius" in live:
            param_sq = agreed(tf.stack([transforms.squared_norm(p) for p in new_params]))
            stats["param_norm"] = tf.sqrt(tf.reduce_sum(param_sq))
            stats["param_norm_proposed"] = stats["param_norm"]
        if "radius" in live:
            radius = tf.convert_to_tensor(live["radius"])
            scale = transforms.ball_scale(stats["param_norm"], radius)
            new_params = transforms.scale_all(new_params, scale)
            stats["projection_active"] = stats["param_norm"] > radius
            stats["param_norm"] = stats["param_norm"] * scale
            param_sq = param_sq * scale * scale

        assignments += zip(variables, new_params, strict=True)
        if values["telemetry"]:
            stats["param_sq"] = param_sq
            stats["step_sq"] = agreed(
                tf.stack(
                    [
                        transforms.squared_norm(new - old)
                        for new, old in zip(new_params, params, strict=True)
                    ]
                )
            )
            assignments += self._stat_assignments(stats, indices)
        return assignments

    def _sparsify(
        self, grads: list[tf.Tensor], indices: list[int]
    ) -> tuple[list[tf.Tensor], list[Assignment], tf.Tensor]:
        """Step 4: per-tensor top-k, with error feedback when the residuals exist."""
        fraction = self._values["top_k"]
        kept, assignments = [], []
        for g, i in zip(grads, indices, strict=True):
            if self._residuals:
                residual = tf_variable(self._residuals[i])
                g = g + tf.convert_to_tensor(residual)
                sparse = transforms.keep_top_k(g, fraction)
                assignments.append((residual, g - sparse))
            else:
                sparse = transforms.keep_top_k(g, fraction)
            kept.append(sparse)
        sizes = [g.shape.num_elements() for g in grads]
        fraction_kept = sum(transforms.top_k_count(n, fraction) for n in sizes) / sum(sizes)
        return kept, assignments, tf.constant(fraction_kept, tf.float32)

    def _apply_steps(
        self,
        params: list[tf.Tensor],
        steps: list[tf.Tensor],
        indices: list[int],
        lr: tf.Tensor,
        stats: dict[str, tf.Tensor],
    ) -> list[tf.Tensor]:
        """Steps 6–8: layer multipliers, decoupled weight decay, the pruning mask."""
        threshold = self._live.get("prune_threshold")
        frozen_count = []
        new_params = []
        for theta, step, i in zip(params, steps, indices, strict=True):
            lr_mult, decay = self._rules[i]
            if lr_mult != 1.0:
                step = step * lr_mult
            new = theta
            if decay is not None:
                # Same expression as keras.optimizers.AdamW, so `adamw` matches it exactly.
                layer_lr = lr if lr_mult == 1.0 else lr * lr_mult
                new = theta - theta * tf.cast(decay, theta.dtype) * tf.cast(layer_lr, theta.dtype)
            new = new + step
            if threshold is not None:
                frozen = tf.abs(theta) < tf.cast(threshold, theta.dtype)
                new = tf.where(frozen, theta, new)
                frozen_count.append(tf.reduce_sum(tf.cast(frozen, tf.float32)))
            new_params.append(new)
        if threshold is not None:
            total = sum(p.shape.num_elements() for p in params)
            stats["pruned_frozen"] = agreed(tf.add_n(frozen_count)) / total
        return new_params

    def _stat_assignments(self, stats: Mapping[str, Any], indices: list[int]) -> list[Assignment]:
        """The telemetry variables' new values; knobs that are off report neutral values."""
        neutral = {"clip_active": 0, "projection_active": 0, "top_k_kept": 1, "pruned_frozen": 0}
        assignments = []
        for name in SCALAR_STATS:
            value = tf.cast(stats.get(name, neutral.get(name)), tf.float32)
            assignments.append((tf_variable(self._stats[name]), value))
        size = len(self._trainable_variables)
        for name in VECTOR_STATS:
            vector = tf.scatter_nd(tf.constant(indices)[:, None], stats[name], [size])
            assignments.append((tf_variable(self._stats[name]), vector))
        return assignments

    # The algorithm ----------------------------------------------------------------------

    def propose_all(
        self,
        grads: list[tf.Tensor],
        params: list[tf.Tensor],
        indices: list[int],
        learning_rate: tf.Tensor,
    ) -> tuple[list[tf.Tensor], list[Assignment]]:
        """Step 5 for every variable: the proposed steps Δ and the new state values.

        The default calls `propose` per variable with that variable's slots.
        """
        steps, assignments = [], []
        for g, theta, i in zip(grads, params, indices, strict=True):
            slots = {name: tf_variable(self._slots[name][i]) for name in self.slot_names}
            step, new_slots = self.propose(
                g, theta, learning_rate, **{n: tf.convert_to_tensor(s) for n, s in slots.items()}
            )
            steps.append(step)
            assignments += [(slots[name], value) for name, value in new_slots.items()]
        return steps, assignments

    def propose(
        self, gradient: tf.Tensor, param: tf.Tensor, learning_rate: tf.Tensor, **slots: tf.Tensor
    ) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        """The algorithm for one variable: returns (Δ, new slot values by name).

        Pure: read `gradient`, `param` and the current `slots`, return new values; the
        base class writes them. Δ includes the learning rate and its sign.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement `propose`.")

    # Serialization ----------------------------------------------------------------------

    def get_config(self) -> dict[str, Any]:
        learning_rate = super().get_config()["learning_rate"]
        if isinstance(learning_rate, float):
            learning_rate = _as_float(learning_rate)
        config = {"name": self.name, "learning_rate": learning_rate}
        for knob in self.knobs:
            if knob.name == "learning_rate":
                continue
            value = self.get_knob(knob.name)
            if knob.type == "rules":
                value = [rule.to_dict() for rule in value]
            config[knob.name] = value
        return config
