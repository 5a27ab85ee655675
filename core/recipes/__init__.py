"""Recipes: published optimizer findings, reproduced by the lab's own runs and checked
on what they stored (see `recipe.Recipe`, and `runner` to run one on an engine).

Each recipe is a module of its own defining `RECIPE`; a new recipe is one module and its
line in `RECIPES`. Importing this package does not import TensorFlow.
"""

from core.recipes import (
    clipping,
    critical_batch,
    decoupled_weight_decay,
    edge_of_stability,
    heavy_ball,
    large_batch,
    lr_range_test,
    privacy_utility,
    projection,
    warmup,
)
from core.recipes.recipe import Arm, Paper, Recipe, RunResult, Verdict
from core.recipes.runner import Launch, results, run, start, verdict

#: Every recipe by name, in the order a gallery shows them.
RECIPES: dict[str, Recipe] = {
    module.RECIPE.name: module.RECIPE
    for module in (
        edge_of_stability,
        large_batch,
        decoupled_weight_decay,
        lr_range_test,
        warmup,
        clipping,
        projection,
        heavy_ball,
        critical_batch,
        privacy_utility,
    )
}

__all__ = [
    "RECIPES",
    "Arm",
    "Launch",
    "Paper",
    "Recipe",
    "RunResult",
    "Verdict",
    "results",
    "run",
    "start",
    "verdict",
]
