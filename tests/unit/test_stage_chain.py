"""The stages as a chain: an order is checked when it is made, each stage sees only the
fields of the step it declares, writes only those, and declares no field it does not read."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import tensorflow as tf

from core import optimizers
from core.optimizers import stages
from core.optimizers.stages import (
    ChainError,
    Stage,
    StageHost,
    Step,
    Written,
    chain,
    composition,
)


def test_the_built_in_order_is_checked_at_import_and_holds() -> None:
    assert chain(*stages.STAGES) == stages.STAGES


def test_a_stage_reading_what_no_stage_before_it_writes_is_refused() -> None:
    order = list(stages.STAGES)
    order.remove(stages.PruneMask)
    order.insert(order.index(stages.WeightDecay), stages.PruneMask)
    with pytest.raises(ChainError) as refused:
        chain(*order)
    assert str(refused.value) == (
        "PruneMask reads `new_params`, which no stage before it writes "
        "(WeightDecay writes it, after PruneMask)"
    )
    without_decay = [stage for stage in stages.STAGES if stage is not stages.WeightDecay]
    with pytest.raises(ChainError, match="PruneMask reads `new_params`, which no stage before"):
        chain(*without_decay)


def test_a_chain_that_leaves_out_the_result_or_repeats_a_stage_is_refused() -> None:
    with pytest.raises(ChainError, match="optimizer writes `new_params` after the chain"):
        chain(stages.ClipNorm, stages.Algorithm)
    with pytest.raises(ChainError, match="ClipNorm is in the chain twice"):
        chain(stages.ClipNorm, *stages.STAGES)


class Doubling(Stage):
    """A stage for these tests: g ← 2·g, reading `params` only when told to."""

    reads: ClassVar[tuple[str, ...]] = ("grads",)
    writes: ClassVar[tuple[str, ...]] = ("grads",)
    peek = False
    extra: ClassVar[Written] = {}

    def apply(self, step: Step) -> Written:
        if self.peek:
            _ = step.params
        return {"grads": [2 * g for g in step.grads], **self.extra}


def start() -> Step:
    """A step's state of plain numbers: the chain itself needs no TensorFlow."""
    return Step.start(grads=[1.0], params=[5.0], variables=[], rows=[None], indices=[0], lr=0.1)


def made(stage: type[Stage]) -> Stage:
    """A stage of no optimizer, for what needs none."""
    return stage(host=None, values={}, order=(stage,))


def test_a_stage_sees_only_what_it_declares_and_writes_only_that() -> None:
    stage = made(Doubling)
    assert stages.run([stage], start()).grads == (2.0,)
    stage.peek = True
    with pytest.raises(ChainError, match="Doubling reads `params` without declaring it"):
        stages.run([stage], start())
    stage.peek, stage.extra = False, {"steps": [0.0]}
    with pytest.raises(ChainError, match="Doubling writes `steps` without declaring it"):
        stages.run([stage], start())
    with pytest.raises(AttributeError, match="read-only"):
        start().grads = []


def test_the_statistics_and_assignments_add_up_the_other_fields_are_replaced() -> None:
    step = start().after(made(Doubling), {"grads": [3.0]})
    assert step.grads == (3.0,) and step.stats == {} and step.assignments == ()

    class Measuring(Stage):
        writes = ("stats", "assignments")

    first = step.after(made(Measuring), {"stats": {"a": 1}, "assignments": ["x"]})
    second = first.after(made(Measuring), {"stats": {"b": 2}, "assignments": ["y"]})
    assert dict(second.stats) == {"a": 1, "b": 2} and second.assignments == ("x", "y")


def test_stages_use_only_what_their_host_declares_and_the_optimizer_has_it() -> None:
    declared = set(StageHost.__annotations__) | {
        name for name in vars(StageHost) if not name.startswith("_")
    }
    used = {
        node.attr
        for path in Path(stages.__file__).parent.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "host"
    }
    assert used and used <= declared, f"not in StageHost: {sorted(used - declared)}"
    assert isinstance(optimizers.build("sgd"), StageHost)


def reads_seen(monkeypatch: pytest.MonkeyPatch) -> dict[str, set[str]]:
    """The fields each stage reads while the test runs, by stage name."""
    seen: dict[str, set[str]] = {}
    original = Step.__getattr__

    def recording(step: Step, name: str) -> Any:
        if name in composition.FIELDS and step._reader is not None:
            seen.setdefault(step._reader, set()).add(name)
        return original(step, name)

    monkeypatch.setattr(Step, "__getattr__", recording)
    return seen


def test_each_stage_reads_every_field_it_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every knob on (dense), and a sparse gradient with telemetry and no radius: between
    # them they take every branch of every stage that reads a field.
    seen = reads_seen(monkeypatch)
    dense = keras_variable((4, 3))
    everything = optimizers.build(
        "adamw",
        learning_rate=0.1,
        clip_norm=1.0,
        noise_std=0.1,
        top_k=0.5,
        l2=0.01,
        weight_decay=0.1,
        prune_threshold=0.01,
        radius=5.0,
        layer_rules=[{"pattern": "w", "lr_mult": 2.0}],
        telemetry=True,
    )
    everything.apply([tf.ones((4, 3))], [dense])
    table = keras_variable((6, 2))
    sparse = optimizers.build("sgd", learning_rate=0.1, telemetry=True)
    sparse.apply([tf.IndexedSlices(tf.ones((2, 2)), tf.constant([1, 4]))], [table])
    assert seen == {stage.__name__: set(stage.reads) for stage in stages.STAGES}


def keras_variable(shape: tuple[int, ...]) -> Any:
    import keras

    return keras.Variable(np.ones(shape, np.float32), name="w")
