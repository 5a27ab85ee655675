"""The files the lab makes beside its store are its owner's alone, whatever the umask:
folders 0700, files 0600: the store and the `-wal` and `-shm` SQLite makes beside it,
checkpoints (TensorFlow's files and the lab's), a fork's copies, a kept model and
landscape, uploads, the engine's lock and log, and a PostgreSQL store's local folder.
`OPTLAB_SHARED=group` gives the group the same access, whatever the umask; any other
value is refused before anything is made."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from core.data import files
from core.engine import Engine, RunConfig, lock, server
from core.engine.checkpoints import RunCheckpoints
from core.engine.landscape import Landscape, landscape_path
from core.engine.model_file import kept_model
from core.store import Store
from core.store.paths import FILES_VAR
from tests.cli import run_main
from tests.lean import NO_INSTRUMENTS
from tests.waiting import scaled

# A checkpoint at steps 2 and 4 of a run of 4 tiny MLP steps (a second or so).
RUN = {
    "dataset": "digits",
    "model": "mlp",
    "optimizer": "sgd",
    "max_steps": 4,
    "checkpoint_every": 2,
    **NO_INSTRUMENTS,
}
# An upload: two features then a label, two classes.
CSV = "".join(f"{i},{i % 7},{i % 2}\n" for i in range(40)).encode()
# How the lab leaves each sharing: (folders, files).
PRIVATE, GROUP = (0o700, 0o600), (0o770, 0o660)


@pytest.fixture
def umask() -> Iterator[None]:
    """A umask that would leave the files readable by all (the usual 022), then this
    process's own again."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def wrong(root: Path, sharing: tuple[int, int]) -> dict[str, str]:
    """Everything under `root` whose mode is not the folders' or the files' of `sharing`,
    with its mode; {} if none. Fails unless `root` holds something."""
    found = {}
    for folder, folders, names in os.walk(root):
        for name in [*folders, *names]:
            path = Path(folder, name)
            mode = stat.S_IMODE(path.lstat().st_mode)
            found[str(path.relative_to(root))] = oct(mode)
            if mode == sharing[0 if path.is_dir() else 1]:
                del found[str(path.relative_to(root))]
    assert any(root.iterdir())
    return found


def serve_the_log_and_lock(location: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's log, as a dashboard launching it opens it (the process is not
    started), and its lock, held and let go."""
    monkeypatch.setattr(server.subprocess, "Popen", lambda *args, **kwargs: None)
    server.launch(location, max_concurrent=1)
    held = lock.hold(server.absolute(location))
    assert held is not None
    held.close()


def test_the_labs_files_are_its_owners_alone(
    tmp_path: Path, umask: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file and folder the lab made under a new folder, after a run trained, was
    forked from, had its model and landscape kept, and a dataset uploaded."""
    monkeypatch.delenv("OPTLAB_SHARED", raising=False)
    root = tmp_path / "lab"
    location = str(root / "stores" / "lab.sqlite")
    engine = Engine(location)
    try:
        run_id = engine.start(RunConfig(**RUN))
        assert engine.wait(run_id, scaled(120)).status == "completed"
        checkpoints = RunCheckpoints(engine.store.checkpoint_folder(run_id))
        assert [c.step for c in checkpoints.list()] == [2, 4]
        checkpoints.copy(2, engine.store.checkpoint_folder("fork"))
        kept_model(engine.store, run_id, "last")
        flat = np.zeros(3)
        Landscape(4, flat, flat, flat, np.zeros((3, 3)), flat, np.zeros((3, 2))).save(
            landscape_path(engine.store, run_id, 4)
        )
        files.keep(engine.store.datasets_folder, "mine.csv", CSV)
        serve_the_log_and_lock(location, monkeypatch)
        # While the store is open: its -wal and -shm are there.
        names, bad = {path.name for path in root.rglob("*")}, wrong(root, PRIVATE)
    finally:
        engine.close()
    for made in ("lab.sqlite-wal", "lab.sqlite-shm", "step-4.index", "step-4.keras"):
        assert made in names, sorted(names)
    for suffix in (".landscape.npz", ".csv", ".engine.log", ".engine.lock", ".data-00000-of-00001"):
        assert any(name.endswith(suffix) for name in names), (suffix, sorted(names))
    assert bad == {}


def test_shared_with_the_group_the_labs_files_are_the_groups_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`OPTLAB_SHARED=group`, under a umask that would keep the group out."""
    monkeypatch.setenv("OPTLAB_SHARED", "group")
    previous = os.umask(0o077)
    try:
        root = tmp_path / "lab"
        location = str(root / "stores" / "lab.sqlite")
        with Store(location) as store:
            store.create_run("r1", "r1", {})
            checkpoints = RunCheckpoints(store.checkpoint_folder("r1"))
            # As TensorFlow writes them: at the umask's mode.
            checkpoints.save(2, 1.0, lambda prefix: Path(f"{prefix}.index").write_bytes(b"x"))
            files.keep(store.datasets_folder, "mine.csv", CSV)
            serve_the_log_and_lock(location, monkeypatch)
            made = {str(path.relative_to(root)) for path in root.rglob("*")}
            bad = wrong(root, GROUP)
    finally:
        os.umask(previous)
    assert {"stores/lab.sqlite-wal", "stores/lab.checkpoints/r1/step-2.json"} <= made
    assert bad == {}


@pytest.mark.slow
def test_a_postgresql_stores_local_folder_is_its_owners_alone(
    postgres, tmp_path: Path, umask: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its checkpoints, uploads and engine lock go into `$OPTLAB_FILES`, made if missing."""
    monkeypatch.delenv("OPTLAB_SHARED", raising=False)
    root = tmp_path / "files"
    monkeypatch.setenv(FILES_VAR, str(root / "optlab"))
    url = postgres.create_database()
    with Store(url) as store:
        store.create_run("r1", "r1", {})
        RunCheckpoints(store.checkpoint_folder("r1")).save(
            2, 1.0, lambda prefix: Path(f"{prefix}.index").write_bytes(b"x")
        )
        files.keep(store.datasets_folder, "mine.csv", CSV)
    held = lock.hold(url)
    assert held is not None
    held.close()
    made = [path.name for path in root.rglob("*")]
    assert len([name for name in made if name.endswith((".index", ".csv", ".lock"))]) == 3
    assert wrong(root, PRIVATE) == {}


def test_a_sharing_that_is_neither_is_refused_and_nothing_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPTLAB_SHARED", "world")
    store = tmp_path / "new" / "lab.sqlite"
    code, _, err = run_main("train", "--model", "mlp", "--max-steps", "1", "--store", store)
    assert code == 2 and err.startswith("error: OPTLAB_SHARED: must be 'group' or 'private'")
    assert list(tmp_path.iterdir()) == []
