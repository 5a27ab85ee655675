"""`GlobalVectorOptimizer`: write an algorithm once, on the flattened parameter vector.

Global-vector gradient descent, on Keras 3: concatenate every parameter into
one vector x and every gradient into g, compute x_new = update(x, g), split x_new back into
the variables. A subclass writes only `update`:

```python
class NormalizedGD(GlobalVectorOptimizer):
    \"\"\"x ← x − η·g / ‖g‖\"\"\"

    def update(self, x, g):
        return x - self.learning_rate * g / (tf.norm(g) + 1e-12)
```

State that spans the whole vector (a global momentum, say) is declared in `state_names`:
each name becomes one flat variable, zero at the start, passed to `update` as a keyword
argument; `update` then returns `(x_new, {name: new_value})`.

Everything else comes from `LabOptimizer`: the all-reduce and the writes through the
strategy (no replica drift under `MirroredStrategy`), and every knob, applied to the step
x_new − x in the documented order. Concatenation costs a copy of the parameters and the
gradients each step; an algorithm that needs only global norms is cheaper written per
variable (as `projected_gd` is: the projection knob needs only ‖θ‖).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import keras
import tensorflow as tf

from core.optimizers.lab_optimizer import Assignment, LabOptimizer
from core.optimizers.transforms import replica_mean, tf_variable


class GlobalVectorOptimizer(LabOptimizer):
    """Base class for optimizers written as `update(x, g) -> x_new` on flat vectors.

    Variables without a gradient in a step take part with a zero gradient; their share of
    x_new is not written.
    """

    state_names: ClassVar[tuple[str, ...]] = ()

    def update(self, x: tf.Tensor, g: tf.Tensor, **state: tf.Tensor) -> Any:
        """Returns x_new, or (x_new, {name: new state}) when `state_names` is not empty."""
        raise NotImplementedError(f"{type(self).__name__} must implement `update(x, g)`.")

    def build_slots(self, var_list: list[keras.Variable]) -> dict[str, list[keras.Variable]]:
        size = sum(v.shape.num_elements() for v in var_list)
        return {
            name: [self.add_variable((size,), dtype="float32", name=f"flat_{name}")]
            for name in self.state_names
        }

    def propose_all(
        self,
        grads: Sequence[tf.Tensor],
        params: Sequence[tf.Tensor],
        indices: Sequence[int],
        learning_rate: tf.Tensor,
    ) -> tuple[list[tf.Tensor], list[Assignment]]:
        everything = self.built_variables
        given = dict(zip(indices, zip(grads, params, strict=True), strict=True))
        all_params = [
            given[i][1] if i in given else tf.convert_to_tensor(v) for i, v in enumerate(everything)
        ]
        all_grads = [
            given[i][0] if i in given else tf.zeros_like(p) for i, p in enumerate(all_params)
        ]
        x = _flatten(all_params)
        g = _flatten(all_grads)
        state_vars = {name: tf_variable(self._slots[name][0]) for name in self.state_names}
        result = self.update(x, g, **{n: tf.convert_to_tensor(v) for n, v in state_vars.items()})
        x_new, new_state = result if self.state_names else (result, {})
        # `update` may reduce (a norm, a mean): make every replica take the same values.
        x_new = replica_mean(x_new)
        new_state = {name: replica_mean(value) for name, value in new_state.items()}
        missing = set(self.state_names) - set(new_state)
        if missing:
            raise ValueError(f"{type(self).__name__}.update must return new {sorted(missing)}")
        steps = tf.split(tf.cast(x_new, x.dtype) - x, [p.shape.num_elements() for p in all_params])
        steps = [tf.reshape(s, all_params[i].shape) for i, s in enumerate(steps)]
        assignments = [(state_vars[name], value) for name, value in new_state.items()]
        return [tf.cast(steps[i], params[j].dtype) for j, i in enumerate(indices)], assignments


def _flatten(tensors: list[tf.Tensor]) -> tf.Tensor:
    return tf.concat([tf.reshape(tf.cast(t, tf.float32), [-1]) for t in tensors], axis=0)
