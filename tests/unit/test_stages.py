"""The knobs as stages: the order the docs show is made from `STAGES`, and each
optimizer's docstring lists its knobs."""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from core.optimizers import (
    Adam,
    GlobalVectorOptimizer,
    lab_optimizer,
    optimizer_catalog,
    plugin_folder,
    stages,
)
from core.optimizers.registry import register
from tests import docs
from ui import nav

ROOT = Path(__file__).resolve().parents[2]


def test_the_order_everywhere_is_the_stages_order() -> None:
    names = [stage.__name__ for stage in stages.STAGES if stage.formula]
    assert names == [
        "ClipNorm",
        "GradientNoise",
        "TopK",
        "CoupledL2",
        "Algorithm",
        "LayerMultiplier",
        "WeightDecay",
        "PruneMask",
        "BallProjection",
    ]
    assert stages.order_line() in docs.text().replace("\n", " ")
    assert stages.order_text() in lab_optimizer.__doc__
    assert "stages.order_line()" in (ROOT / nav.OPTIMIZERS.file).read_text()
    lines = stages.order_text().splitlines()
    assert lines[0].startswith("1. g  ← Σ_replicas g") and lines[-1].startswith("10. θ' ← θ'")


def test_knobs_and_statistics_come_from_the_stages_each_once() -> None:
    knobs = [knob.name for knob in stages.COMMON_KNOBS]
    assert knobs[0] == "learning_rate" and len(knobs) == len(set(knobs))
    assert set(knobs) == {knob.name for stage in stages.STAGES for knob in stage.knobs}
    assert tuple(stages.NEUTRAL_STATS) == stages.SCALAR_STATS
    assert stages.NEUTRAL_STATS["clip_active"] == 0.0 and stages.NEUTRAL_STATS["top_k_kept"] == 1


def test_help_lists_each_optimizers_knobs_and_update_rules() -> None:
    assert "beta_1 (default 0.9, in [0, 1)): Decay rate β₁" in Adam.__doc__
    assert "radius (default None, in (0, 1e+06], None: off, live)" in Adam.__doc__
    for spec in optimizer_catalog.BUILTIN:  # each rule written once, in the catalog
        assert f"    {spec.name}: {spec.update_rule}\n" in spec.cls.__doc__

    class Halving(GlobalVectorOptimizer):
        """x ← x / 2"""

        def update(self, x: tf.Tensor, g: tf.Tensor) -> tf.Tensor:
            return x / 2

    assert Halving.__doc__.startswith("x ← x / 2\n\nKnobs:\n    learning_rate")
    try:
        register("halving", summary="Halves x.", update_rule="x ← x/2")(Halving)
        assert Halving.__doc__.startswith("x ← x / 2\n\nRegistered as:\n    halving: x ← x/2\n")
        assert Halving.__doc__.count("Knobs:") == 1
    finally:
        plugin_folder._specs.pop("halving", None)
        plugin_folder._classes.pop("halving", None)
