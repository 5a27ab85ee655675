"""A throwaway PostgreSQL server for the tests, from the installed binaries (Debian's
`postgresql`): `initdb` and `pg_ctl` in a temporary folder, on a free port, removed after.

`initdb` refuses to run as root, so under root the server runs as the `postgres` user.
"""

import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
from psycopg import sql

from tests.waiting import scaled, wait_for

#: Where Debian installs the server's programs, one folder per major version.
INSTALLS = Path("/usr/lib/postgresql")
#: Why a test that needs a server is skipped on a machine without one.
MISSING = (
    f"no PostgreSQL server under {INSTALLS}: install Debian's with "
    "`apt-get install postgresql` (as .ci/run does) to run the PostgreSQL tests"
)


def binaries() -> Path | None:
    """The newest installed server's `bin` folder, None if there is none."""
    found = sorted(INSTALLS.glob("*/bin/pg_ctl"), key=lambda p: int(p.parts[-3]))
    return found[-1].parent if found else None


class PostgresServer:
    """A server of one's own: `url(database)`, `create_database()`, `stop()`, `start()`."""

    def __init__(self, folder: Path, port: int, bin_folder: Path) -> None:
        self.folder = folder
        self.port = port
        self._bin = bin_folder
        self._names = itertools.count()

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new empty database; returns its URL."""
        name = self._new_name()
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def create_schema(self) -> str:
        """A new empty schema of the default database, much faster to make than a
        database; returns the URL that works in it (through `search_path`)."""
        name = self._new_name()
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {name}")
        return f"{self.url()}?options=-csearch_path%3D{name}"

    def create_role(self, password: str) -> str:
        """A new role that logs in only with `password` (SCRAM over TCP: the server's
        other roles stay trusted), and a schema of the default database that it owns;
        returns the URL that works in the schema as the role, its password included."""
        name = self._new_name()
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(name), sql.Literal(password)
                )
            )
            conn.execute(f"CREATE SCHEMA {name} AUTHORIZATION {name}")
        hba = self.folder / "data" / "pg_hba.conf"  # the first line that fits decides
        hba.write_text(f"host all {name} 127.0.0.1/32 scram-sha-256\n{hba.read_text()}")
        self._ctl("reload")
        wait_for(lambda: not _connects(self.url().replace("postgres@", f"{name}@")), 30)
        return (
            f"postgresql://{name}:{quote(password, safe='')}@127.0.0.1:{self.port}/postgres"
            f"?options=-csearch_path%3D{name}"
        )

    def _new_name(self) -> str:
        return f"test_{os.getpid()}_{next(self._names)}"

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1"
            " -c fsync=off -c full_page_writes=off"
        )
        self._ctl("start", "-w", "-o", options, "-l", str(self.folder / "server.log"))

    def stop(self) -> None:
        """Stop at once, as a crash or a lost server would (connections are cut)."""
        self._ctl("stop", "-w", "-m", "immediate")

    def _ctl(self, *args: str) -> None:
        _as_owner(str(self._bin / "pg_ctl"), "-D", str(self.folder / "data"), *args)


@contextlib.contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    """A running server, stopped and removed when the block ends."""
    bin_folder = binaries()
    if bin_folder is None:
        raise RuntimeError(MISSING)
    folder = Path(tempfile.mkdtemp(prefix="optlab-postgres-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    server = PostgresServer(folder, _free_port(), bin_folder)
    try:
        _as_owner(
            str(bin_folder / "initdb"),
            "-D",
            str(folder / "data"),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
            "-E",
            "UTF8",
        )
        server.start()
        yield server
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _as_owner(*command: str) -> None:
    """Run a server program as the folder's owner: `postgres` under root, else oneself."""
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    subprocess.run([*prefix, *command], check=True, capture_output=True, timeout=scaled(120))


def _connects(url: str) -> bool:
    try:
        psycopg.connect(url, connect_timeout=5).close()
    except psycopg.OperationalError:
        return False
    return True


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
