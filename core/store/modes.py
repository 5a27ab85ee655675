"""The modes of the files and folders the lab makes for itself, beside its store.

They hold what a run is (its config, its checkpoints and models, the datasets uploaded to
it) and the engine's log: as Jupyter makes its runtime files, only their owner may read
them by default, whatever the umask: folders 0700, files 0600. `OPTLAB_SHARED=group`
gives the owner's group the same access (folders 0770, files 0660), for a store that
several accounts of one machine use (SQLite's readers write its `-shm` file too).

Every place that makes such a file goes through here: the store's SQLite file (SQLite
gives the `-wal` and `-shm` it makes the file's mode), its `.checkpoints/` and
`.datasets/` folders and what they hold (TensorFlow's, Keras's and NumPy's files
included, through `settle`), the engine's lock and log, and a PostgreSQL store's local
folder. What the lab did not make keeps its mode: an existing folder or file, and every
output the user names (an export, a model saved to a path), which the umask decides.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any, Final

from core.knobs import InvalidInput
from core.store.errors import StoreError

#: The environment variable that shares the lab's files with the owner's group.
SHARED_VAR: Final = "OPTLAB_SHARED"
#: Its values: only the owner (the default, also when unset or empty), or the group too.
PRIVATE: Final = "private"
GROUP: Final = "group"

# Folder and file modes, for the owner alone and with the group.
_MODES: Final = {PRIVATE: (0o700, 0o600), GROUP: (0o770, 0o660)}
# The `os.open` flags of the modes `open_file` takes (`b` and `t` do not change them).
_FLAGS: Final = {
    "w": os.O_WRONLY | os.O_TRUNC,
    "a": os.O_WRONLY | os.O_APPEND,
    "w+": os.O_RDWR | os.O_TRUNC,
    "a+": os.O_RDWR | os.O_APPEND,
}


class SharingError(InvalidInput, StoreError):
    """`OPTLAB_SHARED` holds neither value: refused before the lab makes anything (it is
    bad input, and the store cannot be used)."""

    def __init__(self, why: str) -> None:
        super().__init__({SHARED_VAR: why})


def sharing() -> str:
    """`PRIVATE` or `GROUP`, from `$OPTLAB_SHARED`; `SharingError` for anything else."""
    value = os.environ.get(SHARED_VAR) or PRIVATE
    if value not in _MODES:
        raise SharingError(f"must be {GROUP!r} or {PRIVATE!r} (the default), or unset")
    return value


def folder_mode() -> int:
    """The mode of a folder the lab makes (see `sharing`)."""
    return _MODES[sharing()][0]


def file_mode() -> int:
    """The mode of a file the lab makes (see `sharing`)."""
    return _MODES[sharing()][1]


def make_folder(path: str | os.PathLike[str]) -> Path:
    """Makes the folder `path`, and each of its parents missing, at `folder_mode()`
    exactly (`mkdir` alone would leave the umask's bits out, and give the parents the
    umask's mode); a folder that exists keeps its mode. Returns `path`."""
    path = Path(path)
    if path.is_dir():
        return path
    if path.parent != path:
        make_folder(path.parent)
    mode = folder_mode()
    try:
        path.mkdir(mode)
    except FileExistsError:
        if not path.is_dir():
            raise
        return path  # made meanwhile, by another thread or process
    os.chmod(path, mode)
    return path


def open_file(path: str | os.PathLike[str], mode: str = "w", **kwargs: Any) -> IO[Any]:
    """`open(path, mode)` for a file the lab keeps (`mode` writes: `w`, `a`, `w+`, `a+`,
    each text or `b`): made, with its folder (`make_folder`), at `file_mode()` exactly
    when it is new; one that exists keeps its mode. `kwargs` go to `open`."""
    path = Path(path)
    flags = _FLAGS[mode.replace("b", "").replace("t", "")]
    make_folder(path.parent)
    try:
        descriptor = os.open(path, flags | os.O_CREAT | os.O_EXCL, file_mode())
        os.fchmod(descriptor, file_mode())  # whatever the umask
    except FileExistsError:
        descriptor = os.open(path, flags)
    return os.fdopen(descriptor, mode, **kwargs)


def make_file(path: str | os.PathLike[str]) -> None:
    """Makes the empty file `path` at `file_mode()`, unless it exists: before a library
    makes it at the umask's mode (SQLite, which gives its `-wal` and `-shm` the mode of
    the database's file)."""
    open_file(path, "ab").close()


def settle(*paths: str | os.PathLike[str]) -> None:
    """Gives files the lab asked a library to write (TensorFlow's checkpoints, Keras's
    models, a temporary file) `file_mode()`: libraries make theirs at the umask's."""
    mode = file_mode()
    for path in paths:
        os.chmod(path, mode)
