"""`resolve`: what a dataset's name names, decided in this one place for `registry.info`
(what it is) and `loading.load` (its arrays).

A name is, in this order: a file of the user's (`npz:PATH`, `csv:PATH`); a prepared TFDS
dataset by its TFDS name (`tfds:NAME`); a built-in (`core.data.builtin`), bundled in a
package, made by the lab (`core.data.synthetic`) or read through TFDS; else a plugin's,
if a plugin registered it. The orders cannot disagree: a plugin's name has no `:` and is
never a built-in's.

Pure Python, and nothing is read: deciding a name's kind opens no file.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from pathlib import Path

from core.data import files, tfds_source
from core.data.builtin import BY_NAME
from core.data.dataset import DatasetInfo


class Kind(enum.Enum):
    """What a dataset's name names."""

    FILE = "file"  # `npz:PATH` or `csv:PATH`, a file of the user's
    TFDS = "tfds"  # read through TFDS: a built-in such as `mnist`, or `tfds:NAME`
    BUNDLED = "bundled"  # a built-in that loads offline: in a package, or made by the lab
    PLUGIN = "plugin"  # any other name: a plugin's, if one registered it


@dataclass(frozen=True)
class Source:
    """A dataset's name, resolved.

    Attributes:
        name: The name as given.
        kind: What it names.
        builtin: The catalog's info of a built-in dataset; None for the other kinds.
        tfds_name: The name TFDS knows a `Kind.TFDS` dataset by (`tfds:NAME` without
            its prefix); None for the other kinds.
        root: The TFDS data directory a `Kind.TFDS` dataset is read from; None for the
            other kinds.
    """

    name: str
    kind: Kind
    builtin: DatasetInfo | None = None
    tfds_name: str | None = None
    root: Path | None = None


def resolve(name: str, *, data_dir: str | os.PathLike[str] | None = None) -> Source:
    """What `name` names; `data_dir` is the TFDS data directory (default:
    `$TFDS_DATA_DIR`, else `~/tensorflow_datasets`), for the datasets read through TFDS."""
    if files.is_file(name):
        return Source(name, Kind.FILE)
    if tfds_source.is_tfds(name):
        tfds_name = name.removeprefix(tfds_source.PREFIX)
        return Source(name, Kind.TFDS, tfds_name=tfds_name, root=tfds_source.data_root(data_dir))
    builtin = BY_NAME.get(name) if isinstance(name, str) else None
    if builtin is None:
        return Source(name, Kind.PLUGIN)
    if builtin.offline:
        return Source(name, Kind.BUNDLED, builtin=builtin)
    return Source(
        name, Kind.TFDS, builtin=builtin, tfds_name=name, root=tfds_source.data_root(data_dir)
    )
