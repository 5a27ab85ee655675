"""Data files a user or a shared store hands the lab, made to hurt it: a `.npz` that
expands a thousandfold, features that ask for a model larger than the machine, a run
through the store that names someone else's file, an upload that would replace the file
earlier runs trained on. Each is refused as bad input, naming its field, in bounded
memory, and what a file holds never reaches the store.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest

from core.data import files
from core.data.held import KEPT
from core.engine.client import EngineClient
from core.escaping import escape_markdown
from core.knobs import InvalidInput
from core.store import Store
from tests.apptest import page
from tests.conftest import served
from tests.hostile_files import Zeros, write_npz
from tests.lean import NO_INSTRUMENTS
from tests.waiting import scaled, wait_for
from ui import nav

ROOT = Path(__file__).resolve().parents[2]
GB = 2**30
# The bound the issue sets on a process given a file that expands to 4 GB.
BOUNDED = 1.5 * GB
# Bytes a run of mlp with adam keeps per input feature: dense1's 128 weights, each with
# its gradient, two moments, initial value and sharpness vector entry (float32).
MLP_ADAM_BYTES_PER_FEATURE = 128 * 6 * 4


def expanding_npz(path: Path) -> Path:
    """4 GB of float32 zeros deflated into a file of 4 MB."""
    x_train = Zeros((4096, 2**18), "float32")
    x_test = np.zeros((2, 2**18), "float32")
    labels = {"y_train": np.arange(4096) % 2, "y_test": np.arange(2)}
    write_npz(path, {"x_train": x_train, "x_test": x_test, **labels})
    assert path.stat().st_size < 5 * 2**20 and x_train.nbytes == 4 * GB
    return path


def wide_npz(path: Path, features: int) -> Path:
    """Three rows of `features` bytes each (deflated zeros): rows of features for mlp."""
    rows = {"x_train": Zeros((2, features), "uint8"), "x_test": Zeros((1, features), "uint8")}
    write_npz(path, {**rows, "y_train": np.arange(2), "y_test": np.arange(1)})
    return path


def run_measured(argv: list[str], *, guard: float, timeout: float = 300.0) -> tuple[int, int, str]:
    """Runs `python -m core ARGV`; returns its exit status, its peak resident memory in
    bytes, and its stderr. A guard kills it once its memory passes `guard` bytes, or
    `timeout` nominal seconds pass (its status is then -9): before this fix it grew past
    20 GB.

    The peak is the kernel's high-water mark of the child's own memory (`VmHWM`), read
    every 20 ms: the rusage `wait4` gives counts a forked child's copy of this process
    (a test worker of a gigabyte or more) before it executes Python anew."""
    with tempfile.TemporaryFile() as stderr:
        child = subprocess.Popen(
            [sys.executable, "-m", "core", *argv],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
        )
        done, peaks = threading.Event(), [0]
        threading.Thread(
            target=_guard, args=(child, guard, timeout, done, peaks), daemon=True
        ).start()
        child.wait()
        done.set()
        stderr.seek(0)
        return child.returncode, max(peaks), stderr.read().decode()


def _guard(
    child: subprocess.Popen, limit: float, timeout: float, done: threading.Event, peaks: list[int]
) -> None:
    """Samples the child's high-water mark into `peaks`; kills it past `limit` bytes or
    `timeout` nominal seconds."""
    deadline = time.monotonic() + scaled(timeout)
    status = Path(f"/proc/{child.pid}/status")
    while not done.wait(0.02):
        try:
            high = int(re.search(r"^VmHWM:\s+(\d+) kB", status.read_text(), re.M)[1]) * 1024
        except (OSError, TypeError):  # ended (or a zombie, which has no memory left)
            return
        peaks.append(high)
        if high > limit or time.monotonic() > deadline:
            child.kill()
            return


@contextlib.contextmanager
def peak_growth() -> Iterator[list[int]]:
    """How much this process's resident memory grows at its peak inside the block, in
    bytes (the kernel's high-water mark, reset on entry), put in the yielded list."""
    before = _status_kb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current size
    grown: list[int] = []
    yield grown
    grown.append((_status_kb("VmHWM") - before) * 1024)


def _status_kb(field: str) -> int:
    return int(re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)[1])


def error_line(stderr: str) -> str:
    (line,) = [line for line in stderr.splitlines() if line.startswith("error:")]
    return line


# Item 1: a compressed upload that expands a thousandfold ----------------------------------


def test_the_cli_refuses_a_4_gb_expanding_npz_in_bounded_memory(tmp_path: Path) -> None:
    bomb = expanding_npz(tmp_path / "bomb.npz")
    store = tmp_path / "lab.sqlite"
    argv = ["train", "--store", str(store), "--dataset", f"npz:{bomb}", "--model", "mlp"]
    code, peak, stderr = run_measured(argv, guard=BOUNDED)
    assert code == 2, stderr[-2000:]
    assert error_line(stderr) == (
        "error: dataset: its arrays take 4.0 GB once loaded (features as float32); the "
        "limit is 2.0 GB"
    )
    assert peak < BOUNDED
    assert not store.exists()  # refused before the store was opened


def test_the_train_page_refuses_a_4_gb_expanding_upload_as_a_field_error(
    lab: EngineClient, tmp_path: Path
) -> None:
    content = expanding_npz(tmp_path / "bomb.npz").read_bytes()
    at = page(nav.TRAIN).run()
    with peak_growth() as grown:
        at.file_uploader(key="train_upload").set_value(("bomb.npz", content, "")).run()
    reason = "its arrays take 4.0 GB once loaded (features as float32); the limit is 2.0 GB"
    assert not at.exception and at.session_state["train_errors"] == {"dataset": reason}
    assert [error.value for error in at.error] == [f"**dataset**: {escape_markdown(reason)}"]
    assert files.kept(lab.store.datasets_folder) == []
    assert grown[0] < 256 * 2**20


# Item 2: features that ask for a model larger than the machine ----------------------------


def test_the_cli_refuses_a_model_that_cannot_fit_before_building_it(tmp_path: Path) -> None:
    """60 M byte features make mlp's first layer 7.7 G weights: refused, with its size,
    before Keras allocates any (it reached 7.8 GB and crashed in Keras's initializer)."""
    wide = wide_npz(tmp_path / "wide.npz", 60_000_000)
    assert wide.stat().st_size < 2**20
    store = tmp_path / "lab.sqlite"
    argv = ["train", "--store", str(store), "--dataset", f"npz:{wide}", "--model", "mlp"]
    argv += ["--optimizer", "adam", "--batch-size", "1", "--max-steps", "1"]
    code, peak, stderr = run_measured(argv, guard=3 * GB)
    assert code == 2, stderr[-2000:]
    line = error_line(stderr)
    assert line.startswith(
        "error: model: mlp on examples of shape (60000000,) has 7,680,008,514 parameters: "
        "with the adam optimizer's state it needs at least 171.7 GB, and "
    )
    assert line.endswith("GB of memory is available; take a smaller model, or fewer features")
    assert peak < 3 * GB  # the data (720 MB as float32) and TensorFlow, no weights
    with Store(store) as opened:
        assert opened.list_runs() == []


def test_the_train_page_shows_the_engines_refusal_of_a_model_that_cannot_fit(
    lab: EngineClient, tmp_path: Path
) -> None:
    """The dashboard never imports TensorFlow: its engine measures the model and refuses
    the run; the form shows why under `model`, and no run is left."""
    features = int(1.5 * psutil.virtual_memory().available / MLP_ADAM_BYTES_PER_FEATURE)
    content = wide_npz(tmp_path / "wide.npz", features).read_bytes()
    at = page(nav.TRAIN).run()
    at.file_uploader(key="train_upload").set_value(("wide.npz", content, "")).run()
    at.selectbox(key="run:model").select("mlp").run()
    at.selectbox(key="run:optimizer").select("adam").run()
    at.text_input(key="run:batch_size").input("1").run()
    at.button(key="start").click().run()
    try:
        assert not at.exception
        errors = at.session_state["train_errors"]
        assert set(errors) == {"model"} and errors["model"].startswith(
            f"mlp on examples of shape ({features},) has {128 * (features + 1) + 8_256 + 130:,} "
            "parameters: with the adam optimizer's state it needs at least "
        )
        shown = f"**model**: {escape_markdown(errors['model'])}"
        assert shown in [error.value for error in at.error]
        assert lab.list() == []
    finally:
        KEPT.clear()  # the dataset this process read


def test_a_group_with_a_run_that_cannot_fit_starts_not_at_all(
    lab: EngineClient, tmp_path: Path
) -> None:
    """Runs handed over together (repeats, a race) start whole or not at all: the engine
    takes the first and refuses the second; the first is withdrawn, and nothing is left."""
    features = int(1.5 * psutil.virtual_memory().available / MLP_ADAM_BYTES_PER_FEATURE)
    content = wide_npz(tmp_path / "wide.npz", features).read_bytes()
    wide = files.keep(lab.store.datasets_folder, "wide.npz", content)
    fits = {"model": "mlp", "dataset": "digits", "epochs": 10_000, **NO_INSTRUMENTS}
    try:
        with pytest.raises(InvalidInput) as refusal:
            lab.start_all([fits, {**fits, "optimizer": "adam", "dataset": wide, "batch_size": 1}])
        assert set(refusal.value.errors) == {"model"}
        assert lab.list() == []
    finally:
        KEPT.clear()  # the dataset this process read


# Item 4: a run through the store names someone else's file ---------------------------------

SECRET_LINES = [
    "root:x:0:0:root:/root:/bin/bash",
    "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin",
    "alice:$6$salt$c2VjcmV0aGFzaA:19000:0:99999:7:::",
]
SECRET_WORDS = ("/bin/bash", "daemon", "nologin", "alice", "c2VjcmV0aGFzaA", "99999")
CSV_RUN = {"model": "mlp", "optimizer": "sgd", "batch_size": 4, "max_steps": 2, **NO_INSTRUMENTS}


def handed(store: Store, engine_owner: str, **config: object) -> str:
    """A run written straight into the store for the engine, as any writer of a shared
    store can write one (no client validates it); returns its id once it was taken."""
    run_id = store.new_run_id()
    store.create_run(run_id, "handed", {**CSV_RUN, **config}, owner=engine_owner, command="start")
    wait_for(
        lambda: not any(c.run_id == run_id for c in store.pending_commands(engine_owner)),
        what="the engine took the start command",
    )
    return run_id


def test_a_run_through_the_store_reads_only_the_uploads(tmp_path: Path) -> None:
    secret = tmp_path / "passwd.csv"
    secret.write_text("\n".join(SECRET_LINES) + "\n")
    numbers = tmp_path / "numbers.csv"
    numbers.write_text("".join(f"{i},{i * 0.5},{i % 2}\n" for i in range(20)))
    path = tmp_path / "lab.sqlite"
    with served(path) as engine, Store(path) as store:
        uploads = store.datasets_folder
        kept = files.keep(uploads, "numbers.csv", numbers.read_bytes())
        link = uploads / "link.csv"
        link.symlink_to(secret)
        refused = {
            handed(store, engine.owner, dataset=f"csv:{secret}"): "dataset",
            handed(store, engine.owner, dataset=f"csv:{numbers}"): "dataset",  # a table, even
            handed(store, engine.owner, dataset=f"csv:{uploads}/../passwd.csv"): "dataset",
            handed(store, engine.owner, dataset=f"csv:{link}"): "dataset",
            handed(store, engine.owner, dataset="tfds:/etc"): "dataset",
            handed(store, engine.owner, dataset="mnist", data_dir=str(tmp_path)): "data_dir",
        }
        for run_id, field in refused.items():
            record = store.get_run(run_id)
            assert record.status == "failed" and record.started is None
            assert record.error.startswith(
                f"{field}: a run handed to the engine through the store "
            ), record.error
            assert store.read_metrics(run_id).last_step is None
        accepted = handed(store, engine.owner, dataset=kept)
        assert engine.wait(accepted, scaled(60)).status == "completed"

        client = EngineClient(store)
        with pytest.raises(InvalidInput) as refusal:
            client.start({**CSV_RUN, "dataset": f"csv:{numbers}"})  # refused before it reads
        assert set(refusal.value.errors) == {"dataset"}
        assert len(store.list_runs()) == len(refused) + 1  # the client's refused run is gone
    everything = "\n".join(sqlite3.connect(path).iterdump())  # runs, events, commands, ...
    for secret in (*SECRET_LINES, *SECRET_WORDS):
        assert secret not in everything


def test_a_resume_or_a_fork_through_the_store_is_held_to_the_uploads_too(tmp_path: Path) -> None:
    """A run trained in this process on a file outside the uploads (as a CLI run) is
    resumed, forked, exported or drawn as a landscape from another process (each rebuilds
    it from its stored config): refused, naming `dataset`. The refused resume leaves it
    resumable, and this process resumes it and writes its model, as `optlab` does."""
    numbers = tmp_path / "numbers.csv"
    numbers.write_text("".join(f"{i},{i * 0.5},{i % 2}\n" for i in range(20)))
    path = tmp_path / "lab.sqlite"
    with served(path) as engine, Store(path) as store:
        long_run = {**CSV_RUN, "dataset": f"csv:{numbers}", "max_steps": None, "epochs": 10_000}
        run_id = engine.start({**long_run, "checkpoint_every": 1})
        wait_for(lambda: engine.status(run_id).step >= 2, what="two steps")
        engine.stop(run_id)
        assert engine.wait(run_id, scaled(60)).status == "stopped"
        client = EngineClient(store)
        with pytest.raises(InvalidInput) as refusal:
            client.fork(run_id, engine.checkpoints(run_id)[-1].step)
        assert set(refusal.value.errors) == {"dataset"}
        with pytest.raises(InvalidInput, match=r"^model: dataset: a run handed"):
            client.model_file(run_id)
        asked = client.ask_landscape(run_id, engine.checkpoints(run_id)[-1].step)
        assert client.settle(asked, 30).error.startswith("dataset: a run handed")
        assert engine.model_file(run_id).exists()  # asked here
        client.resume(run_id)
        wait_for(lambda: not store.pending_commands(engine.owner), what="the resume taken")
        record = store.get_run(run_id)
        assert record.status == "interrupted" and record.error.startswith("dataset: ")
        assert [r.id for r in store.list_runs()] == [run_id]  # the refused fork is gone
        engine.resume(run_id)  # asked here, as `optlab resume` asks
        wait_for(lambda: engine.status(run_id).status == "running", what="resumed here")
        engine.stop(run_id)
        assert engine.wait(run_id, scaled(60)).status == "stopped"


def test_the_cli_trains_on_a_file_anywhere(tmp_path: Path) -> None:
    """A local user names any path: only runs through the store are held to the uploads."""
    numbers = tmp_path / "numbers.csv"
    numbers.write_text("".join(f"{i},{i * 0.5},{i % 2}\n" for i in range(20)))
    store = tmp_path / "lab.sqlite"
    argv = ["train", "--store", str(store), "--dataset", f"csv:{numbers}", "--model", "mlp"]
    argv += ["--batch-size", "4", "--max-steps", "2"]
    code, _, stderr = run_measured(argv, guard=3 * GB)
    assert code == 0, stderr[-2000:]


# Item 8c: an upload of a name that exists ----------------------------------------------------


def test_an_upload_of_a_known_name_never_changes_what_earlier_runs_trained_on(
    lab: EngineClient, tmp_path: Path
) -> None:
    def upload(at: object, rows: int) -> bytes:
        x = np.random.default_rng(rows).normal(size=(rows, 3)).astype("float32")
        npz = tmp_path / f"{rows}.npz"
        y = np.arange(rows) % 2
        np.savez(npz, x_train=x[:-10], y_train=y[:-10], x_test=x[-10:], y_test=y[-10:])
        at.file_uploader(key="train_upload").set_value(("mine.npz", npz.read_bytes(), "")).run()
        return npz.read_bytes()

    at = page(nav.TRAIN).run()
    first = upload(at, 60)
    at.selectbox(key="run:model").select("mlp").run()
    at.text_input(key="run:max_steps").input("2").run()
    at.text_input(key="run:batch_size").input("10").run()
    at.button(key="start").click().run()
    assert not at.session_state["train_errors"]
    (run,) = lab.list()
    assert lab.wait(run.id, scaled(60)).status == "completed"
    at = page(nav.TRAIN).run()  # the start went on to Live
    second = upload(at, 80)
    trained_on = Path(run.config["dataset"].removeprefix("npz:"))
    assert trained_on.read_bytes() == first and second != first
    picker = at.selectbox(key="run:dataset")
    assert picker.value != run.config["dataset"]  # the new upload, picked
    ours = [option for option in picker.options if option.startswith("your file mine.npz (")]
    assert len(ours) == 2
