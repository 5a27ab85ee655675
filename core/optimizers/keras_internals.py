"""Every private name of Keras and TensorFlow that the lab relies on, in one module.

The lab's optimizers compute each step for all their variables at once, after the
all-reduce, and write every new value through the strategy (see `lab_optimizer`). Keras 3
has no public hook for that: its TensorFlow backend overrides a private method of its own
for it, and so does `CollectiveOptimizer` here. No other module of `core` names a private
attribute of Keras or TensorFlow (`tests/unit/test_keras_internals.py` holds that): they
call this one.

Checked against Keras {keras} and TensorFlow {tensorflow}, where each hook below was read
(`keras/src/optimizers/base_optimizer.py`, `keras/src/backend/tensorflow/optimizer.py`).
`tests/unit/test_keras_internals.py` fails on any other version, and checks that each hook
is there with the signature it had. On an upgrade: for each hook, read it in the new
version and check what is said below; then set `CHECKED_KERAS` and `CHECKED_TENSORFLOW`.

{hooks}
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import keras
import tensorflow as tf

from core.optimizers.transforms import tf_variable

if TYPE_CHECKING:
    from core.optimizers.stages import Assignment

#: The versions this module was checked against (see the module's docstring).
CHECKED_KERAS = "3.15.1"
CHECKED_TENSORFLOW = "2.21.0"


@dataclass(frozen=True)
class Hook:
    """A private name the lab relies on.

    Attributes:
        path: Where it is: a module's name, then attributes.
        signature: Its parameters, as `inspect.signature` shows them; None for an
            attribute that every built Keras optimizer has.
        why: What the lab needs it for.
        check: What to check of it on an upgrade.
    """

    path: str
    signature: str | None
    why: str
    check: str


HOOKS: tuple[Hook, ...] = (
    Hook(
        "keras.optimizers.Optimizer._backend_update_step",
        "(self, grads, trainable_variables, learning_rate)",
        "`CollectiveOptimizer` overrides it: Keras calls it once per step with every "
        "gradient, after its own clipping and weight decay (the lab passes it neither) and "
        "before EMA and the iteration count, in replica context under a strategy.",
        "`apply` still calls it so, and still filters out None gradients before it; the "
        "TensorFlow backend's own version still sums the gradients with "
        "`ReplicaContext.all_reduce` (as ours does), then writes through `maybe_merge_call` "
        "and `extended.update`.",
    ),
    Hook(
        "keras.optimizers.Optimizer._get_variable_index",
        "(self, variable)",
        "A variable's index among those the optimizer was built with, also for a "
        "replica's component of a mirrored variable: the index of its slots.",
        "It still maps a variable (and a replica's component) to its position in `build`.",
    ),
    Hook(
        "keras.optimizers.Optimizer._use_weight_decay",
        "(self, variable)",
        "Whether `exclude_from_weight_decay` leaves a variable to decay: the test Keras's "
        "AdamW makes, so that ours honours the same exclusions.",
        "It still returns False for the variables and names excluded, else True.",
    ),
    Hook(
        "keras.optimizers.Optimizer._learning_rate",
        None,
        "What holds the learning rate: its variable, or the schedule or function given "
        "(the public `learning_rate` gives only its current value).",
        "It is still set in `__init__` and by the `learning_rate` setter, to a variable "
        "for a float.",
    ),
    Hook(
        "keras.optimizers.Optimizer._trainable_variables",
        None,
        "The variables the optimizer was built with, in order: a global-vector algorithm "
        "sees all of them, the ones without a gradient this step too.",
        "`build` still sets it to its `variables`, in order.",
    ),
    Hook(
        "keras.optimizers.Optimizer._distribution_strategy",
        None,
        "The strategy the optimizer was made under, whose `extended.update` writes each "
        "new value on every device.",
        "The TensorFlow optimizer still sets it in `__init__` to `tf.distribute.get_strategy()`.",
    ),
    Hook(
        "tensorflow.__internal__.distribute.interim.maybe_merge_call",
        "(fn, strategy, *args, **kwargs)",
        "From replica context, calls `fn(strategy, *args)` once in cross-replica context "
        "(or directly, where the strategy needs no merge), as Keras's own update does.",
        "Keras's TensorFlow optimizer still writes its updates through it.",
    ),
    Hook(
        "tensorflow.python.ops.control_flow_util_v2.maybe_set_lowering_attr",
        "(op, lower_using_switch_merge=None)",
        "Marks a cond's `If` op not to be lowered to switches (`called_cond`), which in a "
        "`tf.function` every op of both branches passes through, taken or not.",
        "`cond_v2` still sets the `_lower_using_switch_merge` attribute through it, and the "
        "runtime still runs an `If` op marked False as a call of the branch taken.",
    ),
    Hook(
        "keras.src.utils.naming.to_snake_case",
        "(name)",
        "Keras's rule for an object's name from its class's (AdamW -> adam_w), so that "
        "ours are named as Keras's are (`optimizer_catalog`).",
        "`keras.src.utils.naming.auto_name`, which names an optimizer made without a "
        "name, still applies it before `keras.backend.get_uid`.",
    ),
)


def _hooks_text() -> str:
    """`HOOKS` as the docstring lists them."""

    def paragraph(label: str, text: str) -> str:
        return textwrap.fill(text, 88, initial_indent=f"    {label}: ", subsequent_indent=" " * 8)

    return "\n\n".join(
        f"`{hook.path}`{hook.signature or ' (an attribute)'}\n"
        f"{paragraph('Why', hook.why)}\n{paragraph('Check', hook.check)}"
        for hook in HOOKS
    )


__doc__ = (__doc__ or "").format(
    keras=CHECKED_KERAS, tensorflow=CHECKED_TENSORFLOW, hooks=_hooks_text()
)


class CollectiveOptimizer(keras.optimizers.Optimizer):
    """A Keras optimizer that computes each step for all its variables at once, in replica
    context after the all-reduce (`new_values`), and writes every new value through the
    strategy, as Keras's TensorFlow backend writes its own updates."""

    def _backend_update_step(
        self,
        grads: list[tf.Tensor],
        trainable_variables: list[keras.Variable],
        learning_rate: Any,
    ) -> None:
        variables = [tf_variable(v) for v in trainable_variables]
        context = tf.distribute.get_replica_context()
        # With one replica there is nothing to reduce, and TensorFlow's all-reduce would
        # register a gradient function per trace that it never frees.
        if context is not None and context.num_replicas_in_sync > 1:
            grads = context.all_reduce(tf.distribute.ReduceOp.SUM, list(grads))
        indices = [self._get_variable_index(v) for v in trainable_variables]
        assignments = self.new_values(list(grads), variables, indices, learning_rate)
        tf.__internal__.distribute.interim.maybe_merge_call(
            self._assign_all, self._distribution_strategy, assignments
        )

    def _assign_all(
        self, strategy: tf.distribute.Strategy, assignments: Sequence[Assignment]
    ) -> None:
        """Writes each value into its variable on every device, through the strategy, with
        `self.assign`, which scatters a `tf.IndexedSlices` (new values of some rows) and
        writes a tensor whole: Keras requires it of every optimizer, so that a sparse
        update stays sparse. (A method, not an argument of the merge call, which would
        make one bound method per replica of it.)"""
        for variable, value in assignments:
            strategy.extended.update(variable, self.assign, args=(value,), group=False)

    def new_values(
        self,
        grads: list[tf.Tensor],
        variables: list[tf.Variable],
        indices: list[int],
        learning_rate: Any,
    ) -> list[Assignment]:
        """The step, as new values for variables: `grads` (all-reduced) of `variables`
        (those of optimizer index `indices`), at `learning_rate`."""
        raise NotImplementedError(f"{type(self).__name__} must implement `new_values`.")

    def uses_weight_decay(self, variable: keras.Variable) -> bool:
        """Whether `exclude_from_weight_decay` leaves `variable` to decay (Keras's own
        test, which its AdamW makes)."""
        return bool(self._use_weight_decay(variable))

    @property
    def learning_rate_holder(self) -> Any:
        """What holds the learning rate: its variable, or the `LearningRateSchedule` or
        function it was given (`learning_rate` is only the current value)."""
        return self._learning_rate

    @property
    def built_variables(self) -> list[keras.Variable]:
        """The variables the optimizer was built with, in order."""
        return list(self._trainable_variables)


def snake_case(name: str) -> str:
    """`name` as Keras names an object of a class called so: AdamW -> adam_w."""
    from keras.src.utils.naming import to_snake_case

    return str(to_snake_case(name))


def called_cond(pred: tf.Tensor, true_fn: Callable[[], Any], false_fn: Callable[[], Any]) -> Any:
    """`tf.cond`, run as a call of the branch taken. In a `tf.function`, TensorFlow lowers a
    cond to switches that every op of both branches still passes through, taken or not:
    on the bench's 100-variable MLP, 0.3 ms a step for the telemetry's two branches."""
    from tensorflow.python.ops import control_flow_util_v2

    out = tf.cond(pred, true_fn, false_fn)
    outputs = tf.nest.flatten(out)
    if outputs and not tf.executing_eagerly():
        op = outputs[0].op.inputs[0].op if outputs[0].op.type == "Identity" else outputs[0].op
        if op.type in ("If", "StatelessIf"):
            control_flow_util_v2.maybe_set_lowering_attr(op, lower_using_switch_merge=False)
    return out
