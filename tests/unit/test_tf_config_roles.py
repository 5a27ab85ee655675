"""Which worker of a multi-worker run a process is, from its `TF_CONFIG`."""

from __future__ import annotations

import json

import pytest

from core.cli.workers import Worker, this_worker
from core.knobs import InvalidInput

TWO = {"worker": ["a:1", "b:2"]}


def role(cluster: dict, task: str, index: int) -> Worker:
    return this_worker(
        {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": task, "index": index}})}
    )


def test_worker_0_is_the_chief_unless_the_cluster_names_one() -> None:
    assert this_worker({}) == Worker("worker", 0, 1)
    assert this_worker({}).chief
    assert role(TWO, "worker", 0).chief
    assert not role(TWO, "worker", 1).chief
    assert str(role(TWO, "worker", 1)) == "worker 1 of 2 tasks"
    with_chief = {"chief": ["c:0"], **TWO}
    assert role(with_chief, "chief", 0).chief
    assert not role(with_chief, "worker", 0).chief
    assert role(with_chief, "worker", 0).tasks == 3


@pytest.mark.parametrize("text", ["{not json", '{"cluster": {}}', '["worker"]'])
def test_a_tf_config_that_cannot_be_read_names_the_strategy(text: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        this_worker({"TF_CONFIG": text})
    assert "TF_CONFIG" in raised.value.errors["strategy"]
