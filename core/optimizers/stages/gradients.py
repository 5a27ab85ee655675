"""The stages on the gradient, before the algorithm: clipping, noise, top-k, coupled L2."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from core.knobs import Knob
from core.optimizers.stages.composition import Stage, Step, Written

if TYPE_CHECKING:
    import keras


class ClipNorm(Stage):
    reads = ("grads",)
    writes = ("grads", "stats")
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

    def apply(self, step: Step) -> Written:
        import tensorflow as tf

        from core.optimizers import transforms

        clip_norm = self.live("clip_norm")
        if not self.host.telemetry and clip_norm is None:
            return {}
        norm = transforms.replica_mean(transforms.global_norm(step.grads))
        if clip_norm is None:
            return {"stats": {"grad_norm": norm, "grad_norm_clipped": norm}}
        clip_norm = tf.convert_to_tensor(clip_norm)
        scale = transforms.ball_scale(norm, clip_norm)
        return {
            "grads": transforms.scale_all(step.grads, scale),
            "stats": {
                "grad_norm": norm,
                "grad_norm_clipped": norm * scale,
                "clip_active": norm > clip_norm,
            },
        }


class GradientNoise(Stage):
    reads = ("grads", "indices")
    writes = ("grads",)
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

    def apply(self, step: Step) -> Written:
        import tensorflow as tf

        from core.optimizers import transforms

        if (std := self.live("noise_std")) is None:
            return {}
        std, seed = tf.convert_to_tensor(std), self.values["noise_seed"]
        t = self.host.iterations
        return {
            "grads": [
                g + tf.cast(std, g.dtype) * transforms.gradient_noise(g.shape, g.dtype, seed, t, i)
                for g, i in zip(step.grads, step.indices, strict=True)
            ]
        }


class TopK(Stage):
    reads = ("grads", "indices")
    writes = ("grads", "stats", "assignments")
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
            self.host.add_optimizer_variables(list(var_list), "top_k_residual") if feedback else []
        )

    def apply(self, step: Step) -> Written:
        import tensorflow as tf

        from core.optimizers import transforms

        if (fraction := self.values["top_k"]) is None:
            return {}
        kept, assignments = [], []
        for g, i in zip(step.grads, step.indices, strict=True):
            if self.residuals:
                residual = transforms.tf_variable(self.residuals[i])
                g = g + tf.convert_to_tensor(residual)
                sparse = transforms.keep_top_k(g, fraction)
                assignments.append((residual, g - sparse))
            else:
                sparse = transforms.keep_top_k(g, fraction)
            kept.append(sparse)
        sizes = [g.shape.num_elements() for g in step.grads]
        fraction_kept = sum(transforms.top_k_count(n, fraction) for n in sizes) / sum(sizes)
        return {
            "grads": kept,
            "stats": {"top_k_kept": tf.constant(fraction_kept, tf.float32)},
            "assignments": assignments,
        }


class CoupledL2(Stage):
    """g ← g + λ·θ: an L2 penalty (λ/2)·‖θ‖² in the gradient, before the algorithm, so
    that Adam rescales it with the gradient. This is the "Adam with L2" that decoupled
    `weight_decay` is measured against (Loshchilov & Hutter, ICLR 2019), PyTorch's
    `Adam(weight_decay=λ)`; for plain SGD the two are the same."""

    reads = ("grads", "params")
    writes = ("grads",)
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

    def apply(self, step: Step) -> Written:
        import tensorflow as tf

        if (l2 := self.live("l2")) is None:
            return {}
        l2 = tf.convert_to_tensor(l2)
        return {
            "grads": [
                g + tf.cast(l2, g.dtype) * theta
                for g, theta in zip(step.grads, step.params, strict=True)
            ]
        }
