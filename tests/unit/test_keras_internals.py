"""The private names of Keras and TensorFlow that the lab relies on, all in
`core/optimizers/keras_internals.py`: checked against the installed versions, each there
with its signature, named nowhere else in `core`, and never shadowed by an attribute of
the lab's optimizers."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf

from core.optimizers import algorithms, global_vector, keras_internals, lab_optimizer

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = Path(keras_internals.__file__).relative_to(ROOT)


def test_the_installed_keras_and_tensorflow_are_the_versions_checked() -> None:
    for package, version, constant in [
        ("Keras", keras.__version__, keras_internals.CHECKED_KERAS),
        ("TensorFlow", tf.__version__, keras_internals.CHECKED_TENSORFLOW),
    ]:
        assert version == constant, (
            f"{package} is {version}, but {ADAPTER} was checked against {constant}: re-check "
            "each hook its docstring lists in the new version, then update its CHECKED_ constants"
        )


def resolved(path: str) -> Any:
    """The object at a dotted `path`: the longest importable module, then attributes."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for name in parts[split:]:
            found = getattr(found, name)
        return found
    raise ImportError(path)


def built_keras_optimizer() -> keras.optimizers.Optimizer:
    optimizer = keras.optimizers.SGD(0.1)
    optimizer.build([keras.Variable([1.0])])
    return optimizer


def test_each_hook_is_there_with_the_signature_it_was_checked_with() -> None:
    optimizer = built_keras_optimizer()
    for hook in keras_internals.HOOKS:
        if hook.signature is None:  # an attribute every built optimizer has
            owner, name = hook.path.rsplit(".", 1)
            assert isinstance(optimizer, resolved(owner))
            assert hasattr(optimizer, name), f"{hook.path} is gone: re-check {ADAPTER}"
        else:
            signature = str(inspect.signature(resolved(hook.path)))
            assert signature == hook.signature, f"{hook.path}{signature}: re-check {ADAPTER}"


def private_names() -> set[str]:
    """The private attributes of Keras's optimizer, variable and model and TensorFlow's
    variable: the names a module could reach into them by."""
    optimizer = built_keras_optimizer()
    names = set(vars(optimizer))
    for owner in (keras.optimizers.Optimizer, keras.Variable, keras.Model, tf.Variable):
        names |= set(dir(owner))
    return {name for name in names if name.startswith("_") and not name.endswith("__")}


def test_no_other_module_of_core_names_a_private_keras_or_tensorflow_name() -> None:
    trees = {
        path: ast.parse(path.read_text(), str(path))
        for path in sorted((ROOT / "core").rglob("*.py"))
        if path != ROOT / ADAPTER
    }
    # A private name that core gives one of its own objects (`self._lock`) is core's.
    own = {
        node.attr
        for tree in trees.values()
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
    }
    keras_private = private_names() - own
    found = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            text = ""
            if isinstance(node, ast.Attribute) and node.attr in keras_private | {"__internal__"}:
                text = ast.unparse(node)
            elif isinstance(node, ast.FunctionDef) and node.name in keras_private:
                text = f"def {node.name}"  # an override of a private method
            elif isinstance(node, ast.ImportFrom | ast.Import):
                modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                modules += [alias.name for alias in node.names]
                if any(m.startswith(("keras.src", "tensorflow.python")) for m in modules):
                    text = ast.unparse(node)
            if text:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text}")
    assert not found, f"call {ADAPTER} instead:\n" + "\n".join(found)


def own_names(cls: type) -> set[str]:
    """The attributes a class of the lab's defines or assigns (`self.name = ...`)."""
    names = set(vars(cls))
    for node in ast.walk(ast.parse(inspect.getsource(cls))):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            names.add(node.attr)
    return names


def test_no_attribute_of_the_lab_optimizers_shadows_a_private_one_of_keras() -> None:
    classes = [
        keras_internals.CollectiveOptimizer,
        lab_optimizer.LabOptimizer,
        global_vector.GlobalVectorOptimizer,
        algorithms.SGD,
        algorithms.Momentum,
        algorithms.Adam,
    ]
    ours = set().union(*(own_names(cls) for cls in classes))
    overridden = {hook.path.rsplit(".", 1)[1] for hook in keras_internals.HOOKS}
    shadowed = (ours & private_names()) - overridden
    assert not shadowed, f"Keras has these too, and would lose them: {sorted(shadowed)}"
