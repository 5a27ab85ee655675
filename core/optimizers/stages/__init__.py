"""The knobs every optimizer has, as a chain of stages, in the order they act.

Each stage is a transformation of the step's state (`Step`: the gradients, the parameters,
the proposed steps, the new parameters, the statistics, the new values of the optimizer's
variables). It declares the fields it `reads` and those it `writes`, and returns new values
for the latter; `chain` checks the order as `STAGES` is made, at import, and refuses a
stage that reads a field which no stage before it writes. A stage also declares its knobs,
its line of the update rule and the statistics it reports (with their value while it is
off); `COMMON_KNOBS`, `SCALAR_STATS` and the order shown in the docstrings, docs/keras.md and
the Optimizers page are made from `STAGES`. A new knob is one stage, and its place here.

After Optax's `chain`, with these differences, each for a reason:

- A stage's state (top-k's residuals, the statistics) lives in the optimizer's Keras
  variables, which the stage makes at `build` and whose new values it returns
  (`assignments`), not in a state passed in and out: Keras saves and restores an
  optimizer's variables, and the optimizer writes them all through the strategy, so that
  mirrored copies never drift apart.
- What a stage may use of its optimizer (its live knobs' variables, `add_variable`, its
  step counter, its algorithm) is `StageHost`, not the optimizer.
- The chain is the same for every optimizer: a subclass brings an algorithm (the
  `Algorithm` stage calls it), not stages, so that every optimizer takes every knob.
- `Telemetry`, last, records what the others measured; it changes nothing of the update.

A stage whose knob is `None` does nothing and is not traced. A variable with a sparse
gradient (an embedding's `tf.IndexedSlices`) is updated by rows when every stage acts on it
row by row (`Stage.row_local`): the step then holds only the rows the gradient touches, and
writes them back with a scatter, as Keras's own SGD does, instead of a whole table each step.

The stages import TensorFlow only when a step is traced (inside `apply`), so that the
catalog of optimizers, and the dashboard, can list the knobs without it.
"""

from __future__ import annotations

from core.knobs import Knob
from core.optimizers.stages.composition import (
    Assignment,
    ChainError,
    Stage,
    StageHost,
    Step,
    Written,
    chain,
    neutral_stats,
    run,
)
from core.optimizers.stages.gradients import ClipNorm, CoupledL2, GradientNoise, TopK
from core.optimizers.stages.parameters import BallProjection, PruneMask, WeightDecay
from core.optimizers.stages.proposal import Algorithm, LayerMultiplier, matching_rule
from core.optimizers.stages.recording import TELEMETRY, VECTOR_STATS, Telemetry

__all__ = [
    "ALL_REDUCE",
    "COMMON_KNOBS",
    "NEUTRAL_STATS",
    "SCALAR_STATS",
    "STAGES",
    "TELEMETRY",
    "VECTOR_STATS",
    "Algorithm",
    "Assignment",
    "BallProjection",
    "ChainError",
    "ClipNorm",
    "CoupledL2",
    "GradientNoise",
    "LayerMultiplier",
    "PruneMask",
    "Stage",
    "StageHost",
    "Step",
    "Telemetry",
    "TopK",
    "WeightDecay",
    "Written",
    "chain",
    "matching_rule",
    "order_line",
    "order_text",
    "run",
]

#: The step, in order, checked. The all-reduce comes first, outside the stages (see
#: `keras_internals`).
STAGES: tuple[type[Stage], ...] = chain(
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
#: Scalar statistics recorded every step with `telemetry=True`, in `LabOptimizer.stats`,
#: each with its value while its stage is off.
NEUTRAL_STATS: dict[str, float | None] = neutral_stats(STAGES)
SCALAR_STATS: tuple[str, ...] = tuple(NEUTRAL_STATS)
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
