"""The lab on a two-node Ray cluster on this machine: a head node and a second node
(`ray.cluster_utils.Cluster`, one CPU each, named `head` and `second`), its store on the
session's PostgreSQL server, as machines of a real cluster would share it. The cluster
asks for a token of its own (`own_token`): the same whether `~/.ray/auth_token` exists or
not, and whichever Ray test ran before.

The tests run in file order: the last one kills the second node.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from bench.cores import processes
from core.engine import Engine
from core.engine.cluster import NAMESPACE, ClusterError, own_token
from tests.apptest import ROOT, page
from tests.conftest import app_serving
from tests.lean import NO_INSTRUMENTS, NO_INSTRUMENTS_FLAGS
from tests.system.test_hostile_data import MLP_ADAM_BYTES_PER_FEATURE, wide_npz
from tests.system.test_postgres_lab import core
from tests.waiting import holds_for, scaled, wait_for
from ui import nav

pytestmark = pytest.mark.slow

# A trial: long enough to be seen training and stopped (about 15 s), logging every 10 steps.
TRIAL = ["--model", "mlp", "--dataset", "digits", "--batch-size", "32", "--max-steps", "6000"]
TRIAL += ["--log-every", "10", "--no-telemetry"]
# A run that trains until it is stopped.
LONG = {"model": "mlp", "dataset": "digits", "optimizer": "sgd", "epochs": 10_000, **NO_INSTRUMENTS}
# Part of a store's password, which the cluster must show nowhere.
SECRET = "s3cr3t"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """Two Ray nodes of one CPU each, with a token of their own; yields the cluster (its
    `address`, its `token`, and the second node as `second`)."""
    import ray
    from ray.cluster_utils import Cluster

    with own_token() as token:
        cluster = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": 1, "node_name": "head", "include_dashboard": False},
        )
        cluster.second = cluster.add_node(num_cpus=1, node_name="second")
        cluster.token = token
        cluster.wait_for_nodes()
        try:
            yield cluster
        finally:
            ray.shutdown()
            cluster.shutdown()


def started(engine: Any, run_id: str) -> str:
    """The node of a run once it has taken a step there."""
    wait_for(lambda: engine.status(run_id).step > 0, timeout=120, what=f"run {run_id} to train")
    node = engine.status(run_id).node
    assert node is not None
    return node


def niceness(pid: int) -> int | None:
    """The process's niceness, None if it has ended."""
    try:
        return os.getpriority(os.PRIO_PROCESS, pid)
    except ProcessLookupError:
        return None


def test_a_sweep_spreads_its_trials_over_the_nodes_and_the_dashboard_stops_one(
    cluster, postgres, monkeypatch
) -> None:
    """`optlab sweep` in a process of its own places four trials, two at a time, one CPU
    each, on both nodes; the dashboard (its engine on the same cluster and store) shows
    the cluster and the trials live, where each trains; its Stop reaches a trial through
    the store and the sweep's engine; the sweep goes on to its end."""
    from ui import state

    url = postgres.create_schema()
    where = ["--ray-address", cluster.address, "--store", url]
    search = ["--param", "learning_rate=0.01:0.3:log", "--trials", "4", "--parallel", "2"]
    command = [sys.executable, "-m", "core", "sweep", *where, *search, "--sampler", "random"]
    with app_serving(url, monkeypatch, ray_address=cluster.address):
        lab = state.shared_engine()
        watch = page(nav.LIVE).run()  # loaded once, so that a click later is quick
        assert not watch.exception

        def starting() -> list[Any]:
            """Trials placed and not training yet: a worker importing TensorFlow, seconds."""
            return [run for run in lab.list() if run.active and run.step == 0]

        sweep = subprocess.Popen(
            [*command, *TRIAL],
            cwd=ROOT,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            # Stopped before it trains: a trial of a few seconds could end before a click.
            wait_for(starting, 120, "a trial placed")
            chosen = starting()[0].id
            watch.session_state["watch"] = [chosen]
            watch.run()
            assert not watch.exception
            watch.button(key=f"stop:{chosen}").click().run()
            assert lab.wait(chosen, scaled(60)).status == "stopped"

            wait_for(lambda: (lab.cluster_info() or {}).get("free_cpus") == 0, 30)
            home = page().run()
            assert not home.exception
            (field,) = [info.value for info in home.info if "Ray cluster" in info.value]
            assert "2 node(s) (head, second)" in field and " of 2 CPUs free" in field
            table = home.dataframe[0].value
            assert set(table["node"].dropna()) <= {"head", "second"}
            train = page(nav.TRAIN).run()  # asks for the run's share of the cluster
            assert train.text_input(key="run:num_cpus").value == "1"
            assert train.text_input(key="run:num_gpus").value == "0"
            _, err = sweep.communicate(timeout=scaled(300))
        finally:
            sweep.kill()
    assert sweep.returncode == 0, err[-2000:]
    runs = json.loads(core("runs", "--json", "--store", url).stdout)
    assert sorted(run["status"] for run in runs) == ["completed"] * 3 + ["stopped"]
    assert {run["node"] for run in runs if run["status"] == "completed"} == {"head", "second"}


def test_live_knobs_and_pause_reach_a_run_on_the_cluster(cluster, postgres) -> None:
    engine = Engine(postgres.create_schema(), ray_address=cluster.address)
    try:
        run_id = engine.start({**LONG, "hyperparameters": {"learning_rate": 0.05}})
        started(engine, run_id)
        engine.update(run_id, learning_rate=0.02)
        wait_for(lambda: engine.status(run_id).knobs["learning_rate"] == 0.02, 30)
        engine.pause(run_id)
        wait_for(lambda: engine.status(run_id).status == "paused", 30)
        step = engine.status(run_id).step
        holds_for(lambda: engine.status(run_id).step == step, 1.0, "a paused actor takes no step")
        # Where a population's members meet: paused once it has taken the step asked. Asked
        # while it is paused, as the engine's view of a training actor's step is a relay old
        # (under load, more than 40 of these steps), so the actor hears it before it trains on.
        at = step + 40
        engine.pause(run_id, at_step=at)
        engine.resume(run_id)
        wait_for(lambda: engine.status(run_id).step > step, 30, "it trains on once resumed")
        # Its pause's event, then its status: the engine hears of the actor once a relay.
        wait_for(lambda: at in [e.step for e in engine.events(run_id, "paused")], 60, f"at {at}")
        wait_for(
            lambda: (engine.status(run_id).status, engine.status(run_id).step) == ("paused", at),
            30,
            "paused there, as relayed",
        )
        holds_for(lambda: engine.status(run_id).step == at, 1.0, "it stays at the step asked")
        assert at in {checkpoint.step for checkpoint in engine.checkpoints(run_id)}
        engine.resume(run_id)
        wait_for(lambda: engine.status(run_id).step > at, 30, "it trains on once resumed")
        engine.stop(run_id)
        assert engine.wait(run_id, scaled(60)).status == "stopped"
        (change,) = [e.payload for e in engine.events(run_id) if e.kind == "knob"]
        assert change == {"name": "learning_rate", "value": 0.02, "previous": 0.05}
    finally:
        engine.close()


def test_a_population_spreads_its_members_over_the_nodes(cluster, postgres) -> None:
    """`optlab pbt --ray-address`: two members, one on each node, meet at the interval's
    end, paused there on the cluster, and the worse continues as a fork of the better;
    three members, which the two nodes of one CPU cannot train at once, are refused before
    anything starts (a member left waiting for a CPU would keep the others waiting at
    the interval's end)."""
    url = postgres.create_schema()
    command = [
        "pbt", "--ray-address", cluster.address, "--store", url, "--dataset", "digits",
        "--model", "mlp", "--optimizer", "sgd", "--param", "learning_rate=0.01:0.5:log",
        "--interval", "20", "--generations", "2", "--population-seed", "1",
        "--name", "on-cluster", *NO_INSTRUMENTS_FLAGS,
    ]  # fmt: skip
    refused = core(*command, "--population", "3")
    assert refused.returncode == 2, refused.stderr
    assert "population: needs an engine that trains 3 runs at once" in refused.stderr
    assert "this one trains 2, as many as its Ray cluster's live nodes hold" in refused.stderr
    assert json.loads(core("runs", "--json", "--store", url).stdout) == []

    done = core(*command, "--population", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "step 20: m" in done.stdout and "copies m" in done.stdout
    runs = {run["id"]: run for run in json.loads(core("runs", "--json", "--store", url).stdout)}
    (fork,) = [run for run in runs.values() if run["parent"] is not None]
    members = [run for run in runs.values() if run["parent"] is None]
    assert {run["node"] for run in members} == {"head", "second"}
    assert fork["forked_at"] == 20 and fork["status"] == "completed" and fork["step"] == 40
    copied = runs[fork["parent"]]
    (replaced,) = [run for run in members if run is not copied]
    assert (copied["status"], copied["step"]) == ("completed", 40)
    assert (replaced["status"], replaced["step"]) == ("stopped", 20)


def test_a_run_trains_at_the_engines_priority_not_at_that_of_rays_workers(
    cluster, postgres
) -> None:
    """Ray starts its workers at niceness 15, under its daemons; a run's actor trains at
    the engine's (at 15 it lost a tenth of its steps: bench figure 12)."""
    engine = Engine(postgres.create_schema(), ray_address=cluster.address)
    try:
        run_id = engine.start(LONG)
        started(engine, run_id)
        actors = processes(("actors", b"ray::RunActor"))["actors"]
        # An earlier test's actor may be ending meanwhile.
        assert {niceness(pid) for pid in actors} - {None} == {niceness(os.getpid())}
        engine.stop(run_id)
        assert engine.wait(run_id, scaled(60)).status == "stopped"
    finally:
        engine.close()


def test_the_store_password_is_in_no_actor_record_command_line_or_log(cluster, postgres) -> None:
    """The store's URL, password included, reaches a run's actor without being one of its
    arguments: Ray hands those to anyone who asks for the actor by name (as
    `ray.get_actor` does), and its dashboard shows its records of actors, tasks and jobs.
    While the run trains, none of them holds the password, nor does a command line of this
    machine, nor a log of the cluster's session."""
    engine = Engine(postgres.create_role(f"{SECRET}-of-the-store"), ray_address=cluster.address)
    try:
        run_id = engine.start(LONG)
        started(engine, run_id)
        assert SECRET not in ray_records(cluster.address, f"run-{run_id}")
        assert SECRET.encode() not in command_lines()
        assert SECRET.encode() not in session_logs(cluster)
        engine.stop(run_id)
        assert engine.wait(run_id, scaled(60)).status == "stopped"
    finally:
        engine.close()


def ray_records(address: str, actor: str) -> str:
    """What the cluster tells whoever joins it about its actors, tasks and jobs, as text:
    the actor named `actor` with its creation task, every actor, every task's events,
    every job (with its runtime environment)."""
    from ray._private.grpc_utils import init_grpc_channel
    from ray.core.generated import gcs_service_pb2 as gcs
    from ray.core.generated import gcs_service_pb2_grpc as rpc

    channel = init_grpc_channel(address)
    try:
        actors = rpc.ActorInfoGcsServiceStub(channel)
        named = actors.GetNamedActorInfo(
            gcs.GetNamedActorInfoRequest(name=actor, ray_namespace=NAMESPACE)
        )
        assert named.actor_table_data.name == actor and named.task_spec.args  # it is there
        replies = [
            named,
            actors.GetAllActorInfo(gcs.GetAllActorInfoRequest()),
            rpc.TaskInfoGcsServiceStub(channel).GetTaskEvents(gcs.GetTaskEventsRequest()),
            rpc.JobInfoGcsServiceStub(channel).GetAllJobInfo(gcs.GetAllJobInfoRequest()),
        ]
    finally:
        channel.close()
    return "\n".join(str(reply) + reply.SerializeToString().decode("latin-1") for reply in replies)


def command_lines() -> bytes:
    """Every process's command line, as `ps` shows them."""
    lines = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            lines.append(cmdline.read_bytes())
        except OSError:  # it ended meanwhile
            continue
    return b"\n".join(lines)


def session_logs(cluster: Any) -> bytes:
    """Every log of the cluster's session."""
    logs = Path(cluster.head_node.get_session_dir_path()) / "logs"
    return b"\n".join(path.read_bytes() for path in logs.rglob("*") if path.is_file())


# The lab's join, in a process of its own, as on another machine.
JOIN = """
import sys
from core.engine.cluster import RayCluster
from core.store import Store
RayCluster(sys.argv[1], Store(sys.argv[2])).close()
"""


def test_the_lab_joins_with_the_token_it_has_and_says_how_to_give_one_it_lacks(
    cluster, tmp_path
) -> None:
    """`RAY_AUTH_MODE` unset: with the token in a file, the lab joins (Ray would not, for
    an address); without a token, it says what to do (as with `RAY_AUTH_MODE=token`)."""
    token_file = tmp_path / "token"
    token_file.write_text(cluster.token)
    env = {name: value for name, value in os.environ.items() if not name.startswith("RAY_AUTH")}
    env |= {"HOME": str(tmp_path), "RAY_gcs_server_port_wait_time_s": "2"}  # fail in 2 s

    def join(**more: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-c", JOIN, cluster.address, str(tmp_path / "lab.sqlite")]
        return subprocess.run(
            command, cwd=ROOT, env=env | more, capture_output=True, text=True, timeout=scaled(120)
        )

    joined = join(RAY_AUTH_TOKEN_PATH=str(token_file))
    assert joined.returncode == 0, joined.stderr[-3000:]
    for refused in (join(), join(RAY_AUTH_MODE="token")):
        assert refused.returncode == 1
        assert "ClusterError: ray_address: cannot join the cluster at" in refused.stderr
        assert "the cluster asks for its token: set RAY_AUTH_MODE=token" in refused.stderr


def test_a_run_asking_more_than_any_node_has_fails_saying_so(cluster, postgres) -> None:
    engine = Engine(postgres.create_schema(), ray_address=cluster.address)
    try:
        run_id = engine.start({**LONG, "num_cpus": 2})
        status = engine.wait(run_id, scaled(60))
        assert status.status == "failed"
        assert "no node of the cluster has 2 CPUs" in status.error
    finally:
        engine.close()


def test_a_run_that_cannot_fit_in_its_nodes_memory_fails_there_saying_so(
    cluster, postgres, tmp_path
) -> None:
    """The node measures a run before it builds it, as an engine measures one it trains
    in a thread: mlp over twice as many byte features as the memory available allows
    fails naming `model`, having trained nothing."""
    features = round(2 * psutil.virtual_memory().available / MLP_ADAM_BYTES_PER_FEATURE)
    wide = wide_npz(tmp_path / "wide.npz", features)
    engine = Engine(postgres.create_schema(), ray_address=cluster.address)
    try:
        config = {"model": "mlp", "optimizer": "adam", "batch_size": 1, "max_steps": 1}
        run_id = engine.start({**config, "dataset": f"npz:{wide}", **NO_INSTRUMENTS})
        status = engine.wait(run_id, scaled(120))
        assert status.status == "failed", status.error
        assert status.error.startswith(f"model: mlp on examples of shape ({features},) has ")
        assert engine.metrics(run_id).last_step is None
    finally:
        engine.close()


def test_a_run_waits_for_a_free_cpu_and_can_be_stopped_while_it_waits(cluster, postgres) -> None:
    engine = Engine(postgres.create_schema(), max_concurrent=3, ray_address=cluster.address)
    try:
        busy = [engine.start({**LONG, "seed": seed}) for seed in (0, 1)]
        for run_id in busy:
            started(engine, run_id)
        waiting = engine.start(LONG)
        holds_for(
            lambda: (engine.status(waiting).status, engine.status(waiting).step) == ("queued", 0),
            2.0,
            "the third run queued while two take the cluster's CPUs",
        )
        engine.stop(waiting)
        assert engine.wait(waiting, scaled(10)).status == "stopped"
        for run_id in busy:
            engine.stop(run_id)
            assert engine.wait(run_id, scaled(60)).status == "stopped"
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("store_there", "error"),
    [
        # The actor cannot start: its node cannot reach the database.
        (
            "postgresql://nobody@127.0.0.1:9/nowhere",
            "its Ray actor could not start on its node: StoreError: cannot use the store",
        ),
        # The actor starts, and finds another store, without the run.
        ("{tmp}/elsewhere.sqlite", "its Ray actor failed: UnknownRunError: run_id: no run"),
    ],
    ids=["unreachable", "another store"],
)
def test_a_node_that_cannot_use_the_store_fails_the_run_saying_why(
    cluster, postgres, tmp_path, store_there, error
) -> None:
    """As a node of another network, or with another file at the store's path, would."""
    engine = Engine(postgres.create_schema(), ray_address=cluster.address)
    try:
        assert engine.cluster is not None
        engine.cluster.location = store_there.format(tmp=tmp_path)
        run_id = engine.start(LONG)
        status = engine.wait(run_id, scaled(60))
        assert status.status == "failed", status
        assert status.error.startswith(error), status.error
    finally:
        engine.close()


def test_a_sqlite_store_is_refused_for_a_cluster_with_other_machines(
    cluster, tmp_path, monkeypatch
) -> None:
    """Here every node is this machine; seen from another address, they are not."""
    import ray

    engine = Engine(tmp_path / "local.sqlite", ray_address=cluster.address)  # one machine
    engine.close()
    monkeypatch.setattr(ray.util, "get_node_ip_address", lambda: "203.0.113.9")
    with pytest.raises(ClusterError, match="store: a SQLite file on this machine cannot be"):
        Engine(tmp_path / "refused.sqlite", ray_address=cluster.address)
    assert not ray.is_initialized()  # it left the cluster it joined


def test_a_run_on_a_node_that_dies_ends_interrupted_and_resumes(cluster, postgres) -> None:
    """Last: it kills the second node. Its run ends `interrupted` with what it had
    logged; the run on the head trains on; the lost run resumes from its checkpoint (the
    nodes share OPTLAB_FILES, here one folder) on the node that is left."""
    engine = Engine(postgres.create_schema(), ray_address=cluster.address)
    try:
        run_ids = [engine.start({**LONG, "seed": seed, "checkpoint_every": 5}) for seed in (0, 1)]
        where = {started(engine, run_id): run_id for run_id in run_ids}
        doomed, spared = where["second"], where["head"]
        wait_for(lambda: engine.checkpoints(doomed), 60, "a checkpoint of the run to lose")
        cluster.remove_node(cluster.second)
        status = engine.wait(doomed, scaled(60))
        assert status.status == "interrupted", status
        assert "Ray actor died" in status.error
        assert engine.store.last_step(doomed) > 0  # its metrics are kept
        assert engine.status(spared).status == "running"
        engine.stop(spared)
        assert engine.wait(spared, scaled(60)).status == "stopped"

        engine.resume(doomed)
        resumed_from = engine.checkpoints(doomed)[-1].step
        wait_for(lambda: engine.status(doomed).step > resumed_from, 120, "the resumed run")
        assert engine.status(doomed).node == "head"
        engine.stop(doomed)
        assert engine.wait(doomed, scaled(60)).status == "stopped"
    finally:
        engine.close()
