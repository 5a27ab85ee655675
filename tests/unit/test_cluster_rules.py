"""What the Ray executor decides before it asks Ray anything: which nodes are other
machines (a SQLite store cannot be shared with them), and whether a cluster answers."""

from __future__ import annotations

import socket

import pytest

from core.engine.cluster import ClusterError, check_reachable, remote_nodes
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
