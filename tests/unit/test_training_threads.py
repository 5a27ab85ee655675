"""An engine's TensorFlow pools: one thread an op, and an op a core at once, when its runs
fill the cores."""

from __future__ import annotations

import os

import pytest

from core.training import threads


@pytest.mark.parametrize(
    ("runs", "cores", "pools"),
    [
        (3, 2, {threads.INTRA_OP: "1", threads.INTER_OP: "2"}),  # the demo race on 2 cores
        (2, 2, {threads.INTRA_OP: "1", threads.INTER_OP: "2"}),
        (8, 4, {threads.INTRA_OP: "1", threads.INTER_OP: "4"}),
        (1, 2, {}),  # a core to spare: TensorFlow's defaults
        (2, 16, {}),
    ],
)
def test_pools_follow_the_runs_and_the_cores(runs, cores, pools) -> None:
    assert threads.pool_sizes(runs, cores) == pools


def test_the_engine_sets_them_unless_the_user_did(monkeypatch) -> None:
    # A copy of the environment: what `share_cores` sets would otherwise stay for the
    # engines the worker's later tests start.
    monkeypatch.setattr(os, "environ", dict(os.environ))
    monkeypatch.delenv(threads.INTRA_OP, raising=False)
    monkeypatch.delenv(threads.INTER_OP, raising=False)
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    assert threads.share_cores(3) == {threads.INTRA_OP: "1", threads.INTER_OP: "2"}
    assert threads.share_cores(3) == {}  # set now: left as they are
    monkeypatch.setenv(threads.INTRA_OP, "4")
    monkeypatch.delenv(threads.INTER_OP)
    assert threads.share_cores(3) == {}
    assert threads.INTER_OP not in os.environ
