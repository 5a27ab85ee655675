"""`strategy=multiworker`: one run over two worker processes on localhost ports, each
`optlab train` with its `TF_CONFIG`, against one process with the same global batch."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from core.store import Store
from tests.apptest import ROOT
from tests.cli import run_main
from tests.waiting import scaled

# 20 steps of 64 examples; the global-norm clip and the ball's projection both at work.
RUN = ["--model", "mlp", "--dataset", "digits", "--optimizer", "sgd", "--lr", "0.1"]
RUN += ["--batch-size", "64", "--max-steps", "20", "--seed", "0", "--log-every", "1"]
RUN += ["--clip-norm", "0.5", "--radius", "14", "--no-telemetry"]


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("localhost", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def worker(index: int, ports: list[int], store: str) -> subprocess.Popen[str]:
    tf_config = {
        "cluster": {"worker": [f"localhost:{port}" for port in ports]},
        "task": {"type": "worker", "index": index},
    }
    recorded = ["--store", store, "--name", "two workers"]
    return subprocess.Popen(
        [sys.executable, "-m", "core", "train", *RUN, "--strategy", "multiworker", *recorded],
        cwd=ROOT,
        env={**os.environ, "TF_CONFIG": json.dumps(tf_config), "TF_CPP_MIN_LOG_LEVEL": "3"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_two_workers_train_as_one_process_with_the_same_global_batch(tmp_path) -> None:
    store = str(tmp_path / "lab.sqlite")
    ports = free_ports(2)
    workers = [worker(index, ports, store) for index in (0, 1)]
    try:
        outputs = [process.communicate(timeout=scaled(300)) for process in workers]
    finally:
        for process in workers:
            process.kill()
    for process, (_, err) in zip(workers, outputs, strict=True):
        assert process.returncode == 0, err[-2000:]
    assert "worker 1 of 2 tasks: the chief records this run" in outputs[1][1]

    code, _, err = run_main("train", *RUN, "--store", store, "--name", "one process")
    assert code == 0, err

    with Store(store) as lab:
        runs = {run.name: run for run in lab.list_runs()}
        assert sorted(runs) == ["one process", "two workers"]  # worker 1 recorded nothing
        two, one = (lab.read_metrics(runs[name].id) for name in ("two workers", "one process"))
        replicas = {
            name: [e.payload["replicas"] for e in lab.events(run.id) if e.kind == "init"]
            for name, run in runs.items()
        }
    assert replicas == {"two workers": [2], "one process": [1]}
    assert len(two.steps) == len(one.steps) == 20
    np.testing.assert_allclose(two["loss"], one["loss"], rtol=0, atol=1e-5)
    assert np.all(np.diff(one["loss"][:5]) != 0)  # it trains: the losses move
