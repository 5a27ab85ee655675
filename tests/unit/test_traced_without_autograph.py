"""Every function the lab traces is traced without AutoGraph.

Converting the source of the training step's call tree (the trainer, the task, the
optimizer's stages, the instruments) was 1.2 of a fresh process's 1.9 s to its first
logged step with every instrument; the lab's control flow is Python over Python values or
explicit `tf.cond` / `tf.while_loop`, so AutoGraph has nothing to convert. Keras traces
`model.fit`'s functions without it too (`tf.autograph.experimental.do_not_convert`).
"""

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "core"


def _is_tf_function(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return (
        isinstance(target, ast.Attribute)
        and target.attr == "function"
        and isinstance(target.value, ast.Name)
        and target.value.id == "tf"
    )


def _autograph_off(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and any(
        k.arg == "autograph" and isinstance(k.value, ast.Constant) and k.value.value is False
        for k in node.keywords
    )


def traced_without_autograph() -> dict[str, bool]:
    """Each `tf.function` in `core` (call or decorator), by `file:line`: whether it says
    `autograph=False`."""
    found = {}
    for path in sorted(CORE.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            decorators = getattr(node, "decorator_list", [])
            for candidate in [node, *decorators] if isinstance(node, ast.Call) else decorators:
                if _is_tf_function(candidate):
                    where = f"{path.relative_to(CORE.parent)}:{candidate.lineno}"
                    found[where] = _autograph_off(candidate)
    return found


def test_every_tf_function_in_core_turns_autograph_off() -> None:
    found = traced_without_autograph()
    assert any("core/engine/trainer.py" in where for where in found), found  # the finder finds
    assert [where for where, off in found.items() if not off] == []


def test_the_finder_tells_a_bare_decorator_from_one_with_autograph_off() -> None:
    source = "@tf.function\ndef f(): pass\n@tf.function(autograph=False)\ndef g(): pass\n"
    decorators = [d for node in ast.parse(source).body for d in node.decorator_list]
    assert [_is_tf_function(d) for d in decorators] == [True, True]
    assert [_autograph_off(d) for d in decorators] == [False, True]
