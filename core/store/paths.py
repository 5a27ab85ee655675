"""Where the store lives: a SQLite file (the default) or a PostgreSQL database URL.

A store's location is a path or a PostgreSQL URL. Beside it live the files that are not
rows (checkpoints, uploaded datasets, the engine's lock and log): next to a SQLite file,
or, for a PostgreSQL store, in a local folder named after the server and database.
`canonical` reads every location the lab is given, in one way (a PostgreSQL URL checked
whole by `core.store.urls`). A run id becomes a folder (its checkpoints, a TensorBoard
export) only through `run_folder`, which refuses any id that could lead elsewhere: a
store may come from elsewhere, and anyone who can write it can write any id.
"""

import os
import re
from pathlib import Path
from typing import Final

from core.confined import safe_path
from core.knobs import InvalidInput
from core.redaction import redacted
from core.store import urls
from core.store.errors import LocationError

#: Environment variable that overrides the default location.
ENV_VAR = "OPTLAB_STORE"
#: Environment variable naming the local folder of a PostgreSQL store's side files.
FILES_VAR = "OPTLAB_FILES"

#: The project root: the folder that holds the `core` package.
PROJECT_ROOT = Path(__file__).resolve().parents[2]

#: URL schemes of a PostgreSQL store: libpq's two, and SQLAlchemy's for the lab's driver
#: (psycopg), which Optuna's users write. The store's own is the first.
POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
#: The URL scheme of a SQLite file, as SQLAlchemy writes it: `sqlite:///PATH`.
SQLITE_SCHEME = "sqlite"
#: The forms of a location, for errors.
FORMS = "a file's path, sqlite:///PATH, or postgresql://USER:PASSWORD@HOST:PORT/DATABASE"

# What starts like a URL: a scheme and a colon (`mysql:`, `postgresql+psycopg:`, also
# `lab:PASSWORD@host` without its scheme).
_SCHEME = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]+):")

#: The longest run id; the lab's own are 11 characters (`1201-3fa2c1`).
MAX_RUN_ID: Final = 64
#: What a run id is made of: letters, digits, `_` and `-`, so that it is one path
#: component wherever it goes, and means the same in a shell, a URL and a file name.
RUN_ID: Final = re.compile(rf"[A-Za-z0-9_-]{{1,{MAX_RUN_ID}}}")

Location = str | os.PathLike[str]


def canonical(location: Location) -> str:
    """`location` as the lab opens it: a PostgreSQL URL with the scheme `postgresql://`
    (written `postgresql://`, `postgres://` or `postgresql+psycopg://`), or a path (a
    `sqlite:///PATH` URL's, `~` expanded). Raises `LocationError` for a PostgreSQL URL
    that `urls.parse` refuses, before anything reads it; for a URL of another kind, or a
    text that starts like one (a file so named is `./NAME:...`): such a location is never
    taken for a path, which would create files named after it. Its message quotes a
    scheme only when a '/' follows it (`mysql://`): in `lab:PASSWORD@host` what stands
    before the ':' is a user's name."""
    text = os.fspath(location)
    start = _SCHEME.match(text)
    if start is None:
        return os.path.expanduser(text)
    scheme, rest = start["scheme"].lower(), text[start.end() :]
    if scheme in POSTGRES_SCHEMES and rest.startswith("//"):
        url = f"{POSTGRES_SCHEMES[0]}:{rest}"
        urls.parse(url)
        return url
    if scheme == SQLITE_SCHEME and rest.startswith("///"):
        return _sqlite_path(rest.removeprefix("///"))
    if rest.startswith("/"):
        raise LocationError(
            f"{start[0]}... is not a store's URL: give {FORMS} (./{start[0]}... for a file "
            "so named)"
        )
    raise LocationError(
        f"starts like a URL (a name, then ':') and is not a store's: give {FORMS} (./NAME:... "
        "for a file so named)"
    )


def default_location() -> str:
    """`$OPTLAB_STORE` if set and non-empty (see `canonical`), else `default_path()`.
    A location there that is no store's is refused saying where it came from."""
    override = os.environ.get(ENV_VAR)
    if not override:
        return str(default_path())
    try:
        return canonical(override)
    except LocationError as exc:
        raise LocationError(f"{exc.errors['store']} (in ${ENV_VAR})") from None


def default_path() -> Path:
    """`runs/optlab.sqlite` under the project root: the store when none is named."""
    return PROJECT_ROOT / "runs" / "optlab.sqlite"


def is_url(location: Location) -> bool:
    """Whether `location` is a PostgreSQL URL rather than a file's path (by its scheme
    alone: `canonical` has read the rest)."""
    start = _SCHEME.match(location) if isinstance(location, str) else None
    return start is not None and start["scheme"].lower() in POSTGRES_SCHEMES


def shown(location: Location) -> str:
    """The location as messages show it: a URL without its secrets (see
    `core.redaction`)."""
    return redacted(os.fspath(location), location)


def files_base(location: Location) -> Path:
    """The path the store's side files are named after (`<base>.checkpoints/`, ...): a
    SQLite store's file itself; for a PostgreSQL store,
    `<host>_<port>_<database>[_<schema>].postgresql` in `$OPTLAB_FILES`, else in `runs/`
    under the project root, on each machine that uses it. Raises `LocationError` for a
    URL that `urls.parse` refuses."""
    if not is_url(location):
        return Path(location).expanduser()
    assert isinstance(location, str)
    parts = urls.parse(location)
    name = f"{parts.host.lower() or 'local'}_{parts.port or 5432}_{parts.database}"
    options = " ".join(parts.parameter("options"))
    if schema := re.search(r"search_path\s*=\s*([\w$]+)", options):
        name += f"_{schema[1]}"
    folder = Path(os.environ.get(FILES_VAR) or PROJECT_ROOT / "runs").expanduser()
    return folder / f"{re.sub(r'[^A-Za-z0-9-]+', '_', name)}.postgresql"


def _sqlite_path(path: str) -> str:
    """The file of a `sqlite:///PATH` URL (relative, or absolute as `sqlite:////PATH`)."""
    if path in ("", ":memory:") or "?" in path or "#" in path:
        raise LocationError(f"sqlite:///PATH names a file, and nothing else: give {FORMS}")
    path = os.path.expanduser(path)
    return f"./{path}" if _SCHEME.match(path) else path  # read again, still a path


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
