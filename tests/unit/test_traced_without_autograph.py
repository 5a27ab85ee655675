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
    """Whether `node` names `tf.function`."""
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "function"
        and isinstance(node.value, ast.Name)
        and node.value.id == "tf"
    )


def _autograph_off(call: ast.Call) -> bool:
    return any(
        k.arg == "autograph" and isinstance(k.value, ast.Constant) and k.value.value is False
        for k in call.keywords
    )


def traced_without_autograph(source: str, name: str) -> dict[str, bool]:
    """Each `tf.function` in `source` (a call, or a bare decorator), by `name:line`:
    whether it says `autograph=False`."""
    found = {}
    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, ast.Call) and _is_tf_function(node.func):
            found[f"{name}:{node.lineno}"] = _autograph_off(node)
        for decorator in getattr(node, "decorator_list", []):
            if _is_tf_function(decorator):  # `@tf.function` with no arguments
                found[f"{name}:{decorator.lineno}"] = False
    return found


def test_every_tf_function_in_core_turns_autograph_off() -> None:
    found = {}
    for path in sorted(CORE.rglob("*.py")):
        found |= traced_without_autograph(path.read_text(), str(path.relative_to(CORE.parent)))
    assert any("core/training/trainer.py" in where for where in found), found  # the finder finds
    assert [where for where, off in found.items() if not off] == []


def test_the_finder_tells_a_bare_decorator_or_call_from_one_with_autograph_off() -> None:
    source = (
        "@tf.function\ndef f(): pass\n"
        "@tf.function(autograph=False)\ndef g(): pass\n"
        "h = tf.function(g)\n"
    )
    assert traced_without_autograph(source, "s") == {"s:1": False, "s:3": True, "s:5": False}
