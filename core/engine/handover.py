"""What a run handed to the engine through the store may read: files in the lab's uploads
folder, and TFDS data in the engine's own data dir.

A run that comes through the store (a `start` command: a dashboard's run, fork or resume,
a queue taken over from an engine that died) was written by whoever can write the store,
which for a shared PostgreSQL store is anyone with its password, on any machine. The
engine reads the dataset such a config names, and what it reports of a file (its run's
error) goes back to the store, where the writer reads it. So a handed-over config may name
only files in the store's uploads folder (`Store.datasets_folder`), links resolved, and
TFDS data only in the engine's own data dir; it is checked before anything is read. A
local caller (`optlab train --dataset npz:PATH`, `Engine.start` in a script) names any
path it can read itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.data import files, tfds_source
from core.knobs import InvalidInput

HANDED_OVER = "a run handed to the engine through the store"


def check_handed_over(values: Mapping[str, Any], uploads: Path) -> None:
    """Raises `InvalidInput` naming `dataset` or `data_dir` when the run config `values`
    (as the store holds it, not yet validated) would read outside `uploads` or the
    engine's TFDS data dir. Other values are left to `RunConfig`'s validation."""
    if not isinstance(values, Mapping):
        return  # not a config: validation says so
    errors: dict[str, str] = {}
    dataset, data_dir = values.get("dataset"), values.get("data_dir")
    root = tfds_source.data_root()
    if files.is_file(dataset) and not _inside(dataset.partition(":")[2], uploads):
        errors["dataset"] = (
            f"{HANDED_OVER} may read only files in the lab's uploads ({uploads}): upload it"
        )
    tfds_name = dataset.removeprefix(tfds_source.PREFIX) if tfds_source.is_tfds(dataset) else None
    if tfds_name is not None and not _inside(root / tfds_name, root):
        errors["dataset"] = f"{HANDED_OVER} may name only TFDS datasets in the engine's data dir"
    if isinstance(data_dir, str) and data_dir and not _same(tfds_source.data_root(data_dir), root):
        errors["data_dir"] = f"{HANDED_OVER} may read TFDS data only from the engine's, {root}"
    if errors:
        raise InvalidInput(errors)


def _inside(path: str | os.PathLike[str], folder: Path) -> bool:
    """Whether `path` lies in `folder` once both are resolved (`..` and links)."""
    return Path(path).expanduser().resolve().is_relative_to(folder.resolve())


def _same(path: Path, other: Path) -> bool:
    return path.resolve() == other.resolve()
