"""The stages that form the new parameters θ': decoupled weight decay, the prune mask, and
the projection onto a ball."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from core.knobs import Knob
from core.optimizers.stages.composition import Stage, Step, Written
from core.optimizers.stages.proposal import matching_rule

if TYPE_CHECKING:
    import keras


class WeightDecay(Stage):
    reads = ("params", "steps", "indices", "multipliers", "lr")
    writes = ("new_params",)
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
                used = self.host.uses_weight_decay(variable)
                self.decays.append(everywhere if used else None)

    def row_local(self, index: int) -> bool:
        return self.decays[index] is None  # decay shrinks every row

    def apply(self, step: Step) -> Written:
        import tensorflow as tf

        new_params = []
        for theta, delta, i, m in zip(
            step.params, step.steps, step.indices, step.multipliers, strict=True
        ):
            new = theta
            if (decay := self.decays[i]) is not None:
                # Same expression as keras.optimizers.AdamW, so `adamw` matches it exactly.
                layer_lr = step.lr if m == 1.0 else step.lr * m
                new = theta - theta * tf.cast(decay, theta.dtype) * tf.cast(layer_lr, theta.dtype)
            new_params.append(new + delta)
        return {"new_params": new_params}


class PruneMask(Stage):
    reads = ("params", "new_params")
    writes = ("new_params", "stats")
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

    def apply(self, step: Step) -> Written:
        import tensorflow as tf

        from core.optimizers import transforms

        if (threshold := self.live("prune_threshold")) is None:
            return {}
        masked, frozen_counts = [], []
        for theta, new in zip(step.params, step.new_params, strict=True):
            frozen = tf.abs(theta) < tf.cast(threshold, theta.dtype)
            masked.append(tf.where(frozen, theta, new))
            frozen_counts.append(tf.reduce_sum(tf.cast(frozen, tf.float32)))
        total = sum(p.shape.num_elements() for p in step.params)
        frozen_share = transforms.replica_mean(tf.add_n(frozen_counts)) / total
        return {"new_params": masked, "stats": {"pruned_frozen": frozen_share}}


class BallProjection(Stage):
    reads = ("params", "variables", "rows", "new_params")
    writes = ("new_params", "stats")
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

    def apply(self, step: Step) -> Written:
        import tensorflow as tf

        from core.optimizers import transforms

        radius = self.live("radius")
        if not self.host.telemetry and radius is None:
            return {}
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
        param_sq = transforms.replica_mean(squares)  # per variable (`VECTOR_STATS`)
        norm = tf.sqrt(tf.reduce_sum(param_sq))
        if radius is None:
            stats = {"param_sq": param_sq, "param_norm": norm, "param_norm_proposed": norm}
            return {"stats": stats}
        radius = tf.convert_to_tensor(radius)
        scale = transforms.ball_scale(norm, radius)
        stats = {
            "param_sq": param_sq * scale * scale,
            "param_norm": norm * scale,
            "param_norm_proposed": norm,
            "projection_active": norm > radius,
        }
        return {"new_params": transforms.scale_all(step.new_params, scale), "stats": stats}
