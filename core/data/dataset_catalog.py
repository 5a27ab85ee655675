"""The datasets by name, before anything is loaded: `catalog` lists them, `info` says
what one is. The built-ins are declared in `core.data.builtin`, the plugins' registered
on `PLUGINS` (`@register_dataset`, see `core.data.plugin_data`).

Pure Python on purpose: the dashboard lists datasets on its first page without waiting
for TensorFlow to import.
"""

from __future__ import annotations

from core.data import files, tfds_source
from core.data.builtin import CATALOG, DEFAULT_DATASET
from core.data.dataset import DatasetInfo
from core.data.names import Kind, resolve
from core.data.plugin_data import PLUGINS, register_dataset

__all__ = [
    "DEFAULT_DATASET",
    "PLUGINS",
    "DatasetInfo",
    "catalog",
    "info",
    "register_dataset",
    "unknown",
]


def catalog(*, plugins: bool = False) -> list[DatasetInfo]:
    """Every dataset the lab can load, the offline ones first; with `plugins`, the
    plugins' after them (loading the plugins folder and their data, unless this process
    takes their infos from the engine: see `Shelf.use_source`)."""
    return [*CATALOG, *(PLUGINS.infos() if plugins else ())]


def info(name: str, *, data_dir: str | None = None) -> DatasetInfo:
    """The `DatasetInfo` called `name` (see `core.data.names` for what a name names).

    `npz:PATH` and `csv:PATH` name a file of the user's (see `core.data.files`), read
    here; `tfds:NAME` a prepared TFDS dataset in `data_dir` (default: `$TFDS_DATA_DIR`,
    else `~/tensorflow_datasets`), whose JSON files are read here; a plugin's dataset is
    looked for when no built-in has the name.

    Raises:
        ValueError: `name` is not in the catalog, or its file is not a dataset; the
            message names the field `dataset` and says why.
    """
    source = resolve(name, data_dir=data_dir)
    if source.builtin is not None:
        return source.builtin
    if source.kind is Kind.FILE:
        return files.info(name)
    if source.kind is Kind.TFDS:
        assert source.root is not None
        return tfds_source.info(name, source.root)
    found = PLUGINS.info(name) if isinstance(name, str) else None
    if found is None:
        raise unknown(name)
    return found


def unknown(name: object) -> ValueError:
    """The error for a name that names no dataset, listing those that are known."""
    known = ", ".join(d.name for d in catalog(plugins=True))
    return ValueError(
        f"dataset: unknown dataset {name!r} (known: {known}, npz:PATH or csv:PATH for a "
        "file of yours, or tfds:NAME for a prepared TFDS dataset)"
    )
