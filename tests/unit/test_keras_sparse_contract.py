"""Keras's own optimizer tests, from the installed package, run against the lab's
optimizers: its sparse-gradient contract (`optimizer_sparse_test.py`) and its naming of
optimizers (`optimizer_test.py`'s `test_optimizer_auto_naming`).

Each file's source is compiled as Keras ships it, with one name bound to ours instead of
Keras's: the sparse test's `TEST_CASES`, the naming test's `optimizers` module. Nothing of
either test is copied here, so a Keras upgrade that changes the contract changes this test.
"""

from __future__ import annotations

import ast
import importlib.util
import types
import warnings
from collections.abc import Callable
from typing import Any

import keras
import pytest

from core import optimizers


def keras_test_module(module: str, **replacements: Any) -> types.ModuleType:
    """Keras's test `module` (e.g. "keras.src.optimizers.optimizer_sparse_test"), compiled
    from its installed source with each module-level name in `replacements` bound to the
    given value instead: an assignment to it is dropped, an import of it too."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, f"Keras has no {module}"
    with open(spec.origin, encoding="utf-8") as file:
        tree = ast.parse(file.read(), spec.origin)
    replaced = set(replacements)
    found: set[str] = set()
    body = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names = {t.id for t in node.targets if isinstance(t, ast.Name)}
            found |= names & replaced
            if names & replaced:
                continue
        elif isinstance(node, ast.Import | ast.ImportFrom):
            kept = [a for a in node.names if (a.asname or a.name) not in replaced]
            found |= {a.asname or a.name for a in node.names} - {a.asname or a.name for a in kept}
            if not kept:
                continue
            node.names = kept
        body.append(node)
    tree.body = body
    assert found == replaced, f"{module} no longer defines {sorted(replaced - found)}"
    namespace = types.ModuleType(f"{module}__against_optlab")
    namespace.__dict__.update(replacements)
    with warnings.catch_warnings():  # Keras's own marks, registered by Keras's conftest
        warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
        exec(compile(tree, spec.origin, "exec"), namespace.__dict__)
    return namespace


def built(name: str, **knobs: Any) -> Callable[..., optimizers.LabOptimizer]:
    """A class for Keras's cases, as its own LossScaleOptimizer case makes one: called with
    no argument (or a `name=`), a new lab optimizer `name` with `knobs`, at its defaults."""
    return lambda **more: optimizers.build(name, **knobs, **more)


#: What each of ours does with Keras's sparse gradient (rows 0, 2, 4 of a 5 × 10 table):
#: sgd computes the touched rows alone and scatters them into the table, as Keras's SGD;
#: momentum and Adam read and write their slots on every row, so their update is dense, as
#: Keras's own momentum SGD, Adam and AdamW are (neither writes its slots sparsely).
LAB_CASES = [
    {
        "testcase_name": "sgd",
        "optimizer_class": built("sgd"),
        "expect_model_sparse_variable_updates": True,
    },
    {"testcase_name": "momentum", "optimizer_class": built("momentum")},
    {"testcase_name": "nesterov", "optimizer_class": built("momentum", nesterov=True)},
    {"testcase_name": "adam", "optimizer_class": built("adam")},
    {"testcase_name": "adamw", "optimizer_class": built("adamw")},
]

OptimizerSparseTest = keras_test_module(
    "keras.src.optimizers.optimizer_sparse_test", TEST_CASES=LAB_CASES
).OptimizerSparseTest


#: Keras's `optimizers` module as its naming test uses it, with its classes made ours.
LAB_OPTIMIZERS = types.SimpleNamespace(
    Adam=built("adam"),
    SGD=built("sgd"),
    AdamW=built("adamw"),
    serialize=keras.optimizers.serialize,
    deserialize=keras.optimizers.deserialize,
)
_naming = keras_test_module("keras.src.optimizers.optimizer_test", optimizers=LAB_OPTIMIZERS)


class OptimizerNamingTest(_naming.testing.TestCase):
    """Keras's `test_optimizer_auto_naming`, alone of its `OptimizerTest`: the others test
    Keras's own knobs (EMA, loss scaling, gradient accumulation), which ours do not take."""

    test_optimizer_auto_naming = _naming.OptimizerTest.test_optimizer_auto_naming


def test_the_cases_are_keras_own_tests_run_on_ours() -> None:
    names = {n for n in dir(OptimizerSparseTest) if n.startswith("test_")}
    expected = {
        f"test_sparse_{kind}_{case['testcase_name']}"
        for case in LAB_CASES
        for kind in ("gradients", "correctness")
    }
    assert names == expected
    assert _naming.optimizers is LAB_OPTIMIZERS  # Keras's naming test makes ours
