"""What the Ray executor decides before it asks Ray anything: which nodes are other
machines (a SQLite store cannot be shared with them), and whether a cluster answers."""

from __future__ import annotations

import socket

import pytest

from core.engine.cluster import (
    ClusterError,
    check_reachable,
    remote_nodes,
    runs_at_once,
    runs_held,
)
from core.training.config import RunConfig
from tests.cli import run_main


def node(name: str, address: str, alive: bool = True) -> dict[str, object]:
    return {"NodeName": name, "NodeManagerAddress": address, "Alive": alive}


def test_remote_nodes_are_the_live_ones_at_another_address() -> None:
    nodes = [
        node("head", "10.0.0.1"),
        node("second", "10.0.0.1"),
        node("gpu-box", "10.0.0.7"),
        node("gone", "10.0.0.9", alive=False),
    ]
    assert remote_nodes(nodes, "10.0.0.1") == ["gpu-box"]
    assert remote_nodes(nodes[:2], "10.0.0.1") == []


def test_an_address_nothing_answers_at_is_refused_at_once() -> None:
    with socket.socket() as listener:  # a port that was free a moment ago
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
    with pytest.raises(
        ClusterError, match=f"ray_address: no Ray cluster answers at 127.0.0.1:{port}"
    ):
        check_reachable(f"127.0.0.1:{port}", timeout=2.0)
    with pytest.raises(ClusterError, match="ray_address: must be HOST:PORT"):
        check_reachable("head-node")
    check_reachable("auto")  # Ray's to resolve


def test_the_cli_refuses_a_cluster_that_does_not_answer_before_writing_anything(tmp_path) -> None:
    store = tmp_path / "lab.sqlite"
    code, _, err = run_main(
        "train", "--store", str(store), "--ray-address", "127.0.0.1:9", "--max-steps", "5"
    )
    assert code == 2
    assert "ray_address: no Ray cluster answers at 127.0.0.1:9" in err
    assert not store.exists()


@pytest.mark.parametrize(
    ("sizes", "num_cpus", "num_gpus", "held"),
    [
        ([(1, 0), (1, 0)], 1, 0, 2),  # the test cluster: a run a node
        ([(4, 0), (3, 0)], 2, 0, 3),  # a run never spans two nodes: 2 + 1, not 7 // 2
        ([(2, 0)], 0.5, 0, 4),
        ([(8, 2), (8, 0)], 1, 1, 2),  # only the GPU node holds GPU runs
        ([(8, 2)], 1, 0.3, 6),  # three a GPU, none across two GPUs (not 2 // 0.3 = 6.67)
        ([(8, 3)], 1, 0.4, 6),  # two a GPU: 3 × 2, though 3 // 0.4 = 7
        ([(8, 4)], 1, 2, 2),
        ([(8, 4)], 0, 0, None),  # a run asking for nothing: Ray places any number
        ([], 1, 0, 0),
    ],
)
def test_runs_held_counts_what_each_node_holds(sizes, num_cpus, num_gpus, held) -> None:
    assert runs_held(sizes, num_cpus, num_gpus) == held


def test_an_engine_trains_at_once_what_its_limit_and_its_cluster_allow() -> None:
    config = RunConfig(num_cpus=2)
    assert runs_at_once(4, None, config) == 4  # no cluster: its max_concurrent
    cluster = {"address": "h:6379", "sizes": [[4, 0], [2, 0]]}
    assert runs_at_once(4, cluster, config) == 3
    assert runs_at_once(2, cluster, config) == 2
    # A cluster that cannot be read says so elsewhere; its runs wait for it.
    assert runs_at_once(4, {"address": "h:6379", "error": "gone"}, config) == 4
    assert runs_at_once(4, cluster, RunConfig(num_cpus=0)) == 4
