"""Where the store lives: a SQLite file (the default) or a PostgreSQL database URL.

A store's location is a path or a `postgresql://` URL. Beside it live the files that are
not rows (checkpoints, uploaded datasets, the engine's lock and log): next to a SQLite
file, or, for a PostgreSQL store, in a local folder named after the server and database.
A run id becomes a folder (its checkpoints, a TensorBoard export) only through
`run_folder`, which refuses any id that could lead elsewhere: a store may come from
elsewhere, and anyone who can write it can write any id.
"""

import os
import re
from pathlib import Path
from typing import Final
from urllib.parse import parse_qs, urlsplit, urlunsplit

from core.confined import safe_path
from core.knobs import InvalidInput

#: Environment variable that overrides the default location.
ENV_VAR = "OPTLAB_STORE"
#: Environment variable naming the local folder of a PostgreSQL store's side files.
FILES_VAR = "OPTLAB_FILES"

#: The project root: the folder that holds the `core` package.
PROJECT_ROOT = Path(__file__).resolve().parents[2]

#: URL schemes of a PostgreSQL store.
POSTGRES_SCHEMES = ("postgresql", "postgres")

#: The longest run id; the lab's own are 11 characters (`1201-3fa2c1`).
MAX_RUN_ID: Final = 64
#: What a run id is made of: letters, digits, `_` and `-`, so that it is one path
#: component wherever it goes, and means the same in a shell, a URL and a file name.
RUN_ID: Final = re.compile(rf"[A-Za-z0-9_-]{{1,{MAX_RUN_ID}}}")

Location = str | os.PathLike[str]


def default_path() -> Path:
    """`runs/optlab.sqlite` under the project root: the store when none is named."""
    return PROJECT_ROOT / "runs" / "optlab.sqlite"


def default_location() -> str:
    """`$OPTLAB_STORE` if set and non-empty (a path or a `postgresql://` URL), else
    `default_path()`."""
    override = os.environ.get(ENV_VAR)
    if override:
        return override if is_url(override) else str(Path(override).expanduser())
    return str(default_path())


def is_url(location: Location) -> bool:
    """Whether `location` is a PostgreSQL URL rather than a file's path."""
    return isinstance(location, str) and urlsplit(location).scheme in POSTGRES_SCHEMES


def shown(location: Location) -> str:
    """The location as messages show it: a URL without its password."""
    if not is_url(location):
        return str(location)
    assert isinstance(location, str)
    parts = urlsplit(location)
    if parts.password is None:
        return location
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def files_base(location: Location) -> Path:
    """The path the store's side files are named after (`<base>.checkpoints/`, ...): a
    SQLite store's file itself; for a PostgreSQL store,
    `<host>_<port>_<database>[_<schema>].postgresql` in `$OPTLAB_FILES`, else in `runs/`
    under the project root, on each machine that uses it."""
    if not is_url(location):
        return Path(location).expanduser()
    assert isinstance(location, str)
    parts = urlsplit(location)
    name = f"{parts.hostname or 'local'}_{parts.port or 5432}_{parts.path.lstrip('/')}"
    options = " ".join(parse_qs(parts.query).get("options", []))
    if schema := re.search(r"search_path\s*=\s*([\w$]+)", options):
        name += f"_{schema[1]}"
    folder = Path(os.environ.get(FILES_VAR) or PROJECT_ROOT / "runs").expanduser()
    return folder / f"{re.sub(r'[^A-Za-z0-9-]+', '_', name)}.postgresql"


def check_run_id(run_id: object) -> str:
    """`run_id` if it is a run id the lab accepts (see `RUN_ID`); else `InvalidInput`
    naming `run_id`."""
    if not isinstance(run_id, str) or RUN_ID.fullmatch(run_id) is None:
        raise InvalidInput(
            {"run_id": f"must be 1 to {MAX_RUN_ID} letters, digits, '_' or '-' (got {run_id!r})"}
        )
    return run_id


def run_folder(folder: Location, run_id: str) -> Path:
    """`folder/run_id`: the one way a run id becomes a path, for its checkpoints (and the
    files kept beside them) and its exports.

    Raises `InvalidInput` naming `run_id` for an id that `check_run_id` refuses (a row
    written into the store by hand may hold any), and for one whose folder is a link, so
    that the path is always a folder directly inside `folder` (resolved), never followed
    elsewhere. `folder` need not exist yet.
    """
    check_run_id(run_id)
    root = Path(folder).expanduser().resolve()
    target = root / run_id
    if safe_path(root, run_id, field="run_id") != target:
        raise InvalidInput({"run_id": f"{target} is a link: a run's folder is never followed"})
    return target
