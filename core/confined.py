"""Paths confined to a folder: a name that a user, a run or the store supplied, turned
into a path that cannot lead out of the folder it is meant for."""

from __future__ import annotations

import os
from pathlib import Path, PurePath

from core.knobs import InvalidInput


def safe_path(
    base: str | os.PathLike[str], name: str | os.PathLike[str], *, field: str = "name"
) -> Path:
    """`base / name`, resolved, for a `name` that a user or a run supplied.

    Raises `InvalidInput` (a `ValueError`: "<field>: <reason>") for an empty name or one
    with a NUL byte, an absolute name, a name with a `..` component, and a name that
    resolves to `base` itself or outside it (through a symbolic link, say). `base` need
    not exist yet. The check is on the paths as they are now: a link created later inside
    `base` is not caught.
    """
    text = os.fspath(name)
    if not text or "\x00" in text:
        raise InvalidInput({field: f"must be a non-empty name without NUL bytes (got {text!r})"})
    relative = PurePath(text)
    if relative.is_absolute() or relative.anchor:
        raise InvalidInput({field: f"must be a relative path (got {text!r})"})
    if ".." in relative.parts:
        raise InvalidInput({field: f"must not contain '..' (got {text!r})"})
    root = Path(base).resolve()
    target = (root / relative).resolve()
    if target == root or not target.is_relative_to(root):
        raise InvalidInput({field: f"{text!r} leads outside {root}"})
    return target
