"""Where the store lives: a SQLite file (the default) or a PostgreSQL database URL.

A store's location is a path or a `postgresql://` URL. Beside it live the files that are
not rows (checkpoints, uploaded datasets, the engine's lock and log): next to a SQLite
file, or, for a PostgreSQL store, in a local folder named after the server and database.
"""

import os
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit, urlunsplit

#: Environment variable that overrides the default location.
ENV_VAR = "OPTLAB_STORE"
#: Environment variable naming the local folder of a PostgreSQL store's side files.
FILES_VAR = "OPTLAB_FILES"

#: The project root: the folder that holds the `core` package.
PROJECT_ROOT = Path(__file__).resolve().parents[2]

#: URL schemes of a PostgreSQL store.
POSTGRES_SCHEMES = ("postgresql", "postgres")

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
