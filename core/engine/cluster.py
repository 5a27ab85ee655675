"""Runs on a Ray cluster: each run a Ray actor, placed by Ray on any node with room.

With a cluster address (`--ray-address`, `$OPTLAB_RAY_ADDRESS`), the engine does not train
in its own threads: each run becomes an actor asking for the run's `num_cpus` and
`num_gpus`. The actor opens the same store (so the store must be one every node reaches:
a PostgreSQL URL, or a SQLite file when every node is this machine), executes the run
with the same `RunExecution` a thread would, and writes its metrics straight to the
store. The engine keeps a thread per run that relays the run's control to the actor
(stop, pause, live knob changes, which reach the engine as store commands) and its
progress back, every `RELAY_SECONDS`. A node that dies takes its actors with it: the run
ends `interrupted`, resumable from its last checkpoint (on a folder the nodes share, see
`OPTLAB_FILES`).

Ray is imported only here, and only when a cluster is named.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import queue
import re
import secrets
import socket
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.engine.execution import RunControl, RunExecution
from core.knobs import InvalidInput
from core.store import Store, StoreError, is_url
from core.store.paths import FILES_VAR
from core.training.config import RunConfig

#: Environment variable naming the cluster's address (`host:port`, or `auto`).
ADDRESS_VAR = "OPTLAB_RAY_ADDRESS"
#: Ray's token authentication (Ray >= 2.52): `token` on every node and every process that
#: joins, the token from `TOKEN_VAR`, else the file `RAY_AUTH_TOKEN_PATH` names, else
#: `~/.ray/auth_token`.
AUTH_MODE_VAR = "RAY_AUTH_MODE"
TOKEN_VAR = "RAY_AUTH_TOKEN"
#: The Ray namespace the lab's actors live in.
NAMESPACE = "optlab"
CONNECT_SECONDS = 5.0  # how long a cluster's address may take to answer
RELAY_SECONDS = 0.2  # a stop, pause or knob change reaches the actor within this
# A traceback's last line: `package.module.SomeError: what happened`.
_EXCEPTION_LINE = re.compile(r"^(?:\w+\.)*(\w+(?:Error|Exception|Exit)): (.*)$")
# What an actor's process needs from the engine's environment.
PASSED_VARS = (FILES_VAR, "OPTLAB_PLUGINS")
# Ray lowers its workers' priority to niceness 15, under its own daemons'; a run's actor
# is the work itself, and at 15 it lost a tenth of its steps (bench figure 12). Ray's job
# supervisor asks the same for a job's driver.
ACTOR_RUNTIME_ENV = {"env_vars": {"RAY_worker_niceness": "0"}}


class ClusterError(RuntimeError):
    """The cluster cannot be reached, or cannot serve this store; the message says why."""


@dataclass(frozen=True)
class ClusterInfo:
    """What the Home page shows of a cluster: its live nodes and their resources."""

    address: str
    nodes: tuple[str, ...]  # node names (Ray's default: the node's IP address)
    cpus: float
    gpus: float
    free_cpus: float
    free_gpus: float
    sizes: tuple[tuple[float, float], ...] = ()  # each live node's CPUs and GPUs

    def to_dict(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "nodes": list(self.nodes),
            "cpus": self.cpus,
            "gpus": self.gpus,
            "free_cpus": self.free_cpus,
            "free_gpus": self.free_gpus,
            "sizes": [list(size) for size in self.sizes],
        }


def runs_held(sizes: Iterable[Sequence[float]], num_cpus: float, num_gpus: float) -> int | None:
    """How many runs asking for `num_cpus` CPUs and `num_gpus` GPUs nodes of these sizes
    (each its CPUs and GPUs) train at once, each run on one node, as Ray places actors: a
    fraction of a GPU shares one GPU, never two. None for a run that asks for neither
    (Ray places any number)."""
    if num_cpus <= 0 and num_gpus <= 0:
        return None
    held = 0
    for cpus, gpus in sizes:
        fits = [math.floor(cpus / num_cpus + 1e-9)] if num_cpus > 0 else []
        if 0 < num_gpus < 1:
            fits.append(math.floor(gpus + 1e-9) * math.floor(1 / num_gpus + 1e-9))
        elif num_gpus >= 1:
            fits.append(math.floor(gpus / num_gpus + 1e-9))
        held += min(fits)
    return held


def runs_at_once(max_concurrent: int, cluster: Mapping[str, Any] | None, config: RunConfig) -> int:
    """How many runs like `config` an engine trains at once: its `max_concurrent`, fewer
    if the live nodes of its cluster (`cluster`, as `Engine.cluster_info` gives it) hold
    fewer of them. Runs of others on the cluster may hold some of those nodes meanwhile."""
    if cluster is None or "sizes" not in cluster:
        return max_concurrent
    held = runs_held(cluster["sizes"], config.num_cpus, config.num_gpus)
    return max_concurrent if held is None else min(max_concurrent, held)


class RayCluster:
    """The engine's connection to a Ray cluster (see the module docstring).

    Args:
        address: The cluster's address, as `ray.init` takes it (`HOST:PORT`, or `auto`
            for the cluster this machine belongs to).
        store: The store its runs write to; a SQLite store is refused when a node of the
            cluster is another machine, which could not reach the file.
    """

    def __init__(self, address: str, store: Store) -> None:
        import ray

        self.address = address
        # As every node finds it: a URL, or the file's absolute path.
        self.location = store.location if is_url(store.location) else str(store.path.resolve())
        self._joined = not ray.is_initialized()  # whether `close` leaves the cluster
        if self._joined:
            check_reachable(address)  # Ray itself would retry for minutes
            use_token_if_any()
            try:
                ray.init(
                    address=address,
                    namespace=NAMESPACE,
                    log_to_driver=False,  # a run's output is its metrics and its error
                    logging_level=logging.WARNING,
                    runtime_env={"env_vars": _passed_env()},
                )
            except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as exc:
                raise ClusterError(
                    f"ray_address: cannot join the cluster at {address}: {_join_failure(exc)}"
                ) from None
        if not is_url(self.location):
            others = remote_nodes(ray.nodes(), ray.util.get_node_ip_address())
            if others:
                self.close()
                raise ClusterError(
                    f"store: a SQLite file on this machine cannot be shared with the cluster's "
                    f"other machines ({', '.join(others)}); use a PostgreSQL store "
                    "(--store postgresql://...) that every node reaches"
                )
        self._actor_class = ray.remote(max_concurrency=2, runtime_env=ACTOR_RUNTIME_ENV)(RunActor)

    def close(self) -> None:
        """Leaves the cluster, if this object joined it (its actors end with it)."""
        import ray

        if self._joined:
            ray.shutdown()

    def info(self) -> ClusterInfo:
        """The cluster's live nodes and their total and free CPUs and GPUs."""
        import ray

        total, free = ray.cluster_resources(), ray.available_resources()
        live = [node for node in ray.nodes() if node["Alive"]]
        return ClusterInfo(
            address=self.address,
            nodes=tuple(sorted(node["NodeName"] for node in live)),
            cpus=total.get("CPU", 0.0),
            gpus=total.get("GPU", 0.0),
            free_cpus=free.get("CPU", 0.0),
            free_gpus=free.get("GPU", 0.0),
            sizes=tuple(_size(node) for node in live),
        )

    def execute(self, control: RunControl, store: Store) -> None:
        """Trains `control`'s run as an actor and relays its control until it ends; a
        run whose actor dies (its node lost, its process killed) ends `interrupted`."""
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        config = control.config
        if not self._fits(config):
            _end(
                store,
                control,
                "failed",
                f"num_cpus, num_gpus: no node of the cluster has {config.num_cpus:g} CPUs and "
                f"{config.num_gpus:g} GPUs",
            )
            return
        # The store's location, a URL's password with it, goes through Ray's object store:
        # Ray keeps an actor's arguments in its creation task, which it hands to anyone who
        # asks for the actor by name; an object's contents it shows to no one and logs
        # nowhere. In a list, the argument is the reference, which the actor resolves.
        location = [ray.put(self.location)]
        actor = self._actor_class.options(
            num_cpus=config.num_cpus, num_gpus=config.num_gpus, name=f"run-{control.run_id}"
        ).remote(location, control.run_id, config.to_dict(), control.step)
        try:
            self._relay(actor, control, store)
        except RayActorError as exc:
            _lost(store, control, exc)
        except RayTaskError as exc:  # raised by the run's execution, which should not
            _end(store, control, "failed", f"its Ray actor failed: {_reason(exc)}")
        finally:
            ray.kill(actor, no_restart=True)

    def _relay(self, actor: Any, control: RunControl, store: Store) -> None:
        """Passes the engine's requests to the actor and its progress back until its run
        ends. A stop while the run waits for a node ends it there and then."""
        import ray
        from ray.exceptions import ActorUnavailableError

        done = actor.train.remote()
        relayed = None  # the relay call in flight
        sent: list[dict[str, float]] = []  # the knob changes it carries
        placed = False  # whether the actor has answered one
        while not ray.wait([done], timeout=RELAY_SECONDS)[0]:
            if relayed is None:
                sent += _drain(control)
                relayed = actor.relay.remote(
                    control.stop_reason, control.paused, control.pause_at, sent
                )
            elif ray.wait([relayed], timeout=0)[0]:
                try:
                    status, step, seconds = ray.get(relayed)
                except ActorUnavailableError:  # a passing network fault: ask again, with
                    relayed = None  # the same knob changes (a change set twice is the same)
                    continue
                relayed, sent, placed = None, [], True
                control.status, control.step = status, step
                control.clock_continue(seconds)
                if status == "paused" and control.pause_at is not None and step >= control.pause_at:
                    # It paused at the step asked: paused from now on, as a run here is.
                    control.pause_at, control.paused = None, True
            elif control.stop_reason is not None and not placed:
                _end(store, control, control.stop_reason)
                return
        control.status = ray.get(done)

    def _fits(self, config: RunConfig) -> bool:
        """Whether a live node of the cluster has the run's CPUs and GPUs at all (a run
        that waits for them to be free is placed once they are)."""
        import ray

        held = runs_held(
            [_size(node) for node in ray.nodes() if node["Alive"]], config.num_cpus, config.num_gpus
        )
        return held is None or held >= 1


class RunActor:
    """A run's actor (see the module docstring): `train` executes the run while `relay`,
    on a second thread of the actor, passes the engine's requests in and progress out.
    `location` holds the reference of the store's location in Ray's object store (see
    `RayCluster.execute`)."""

    def __init__(self, location: list[Any], run_id: str, config: dict[str, Any], step: int) -> None:
        import ray

        self.control = RunControl(run_id, RunConfig.from_dict(config), step, node=node_name(ray))
        self.asked_pause_at: int | None = None  # the last `pause_at` relayed
        (store,) = ray.get(location)
        self.store = Store(store)

    def train(self) -> str:
        try:
            return self._refused() or RunExecution(self.control, self.store)()
        finally:
            self.store.close()

    def _refused(self) -> str | None:
        """Ends the run, before anything is built, when its model cannot fit in this
        node's memory (see `core.training.footprint`), as an engine refuses a run it would
        train in a thread: failed, or interrupted if it trained before (it stays
        resumable); returns that status, else None."""
        from core.training.footprint import check_fits

        try:
            check_fits(self.control.config)
        except InvalidInput as exc:
            record = self.store.get_run(self.control.run_id)
            status = "failed" if record is None or record.started is None else "interrupted"
            self.control.status = status
            self.store.finish(self.control.run_id, status, {"steps": self.control.step}, str(exc))
            return status
        return None

    def relay(
        self,
        stop_reason: str | None,
        paused: bool,
        pause_at: int | None,
        updates: list[dict[str, float]],
    ) -> tuple[str, int, float]:
        """Takes the engine's requests; returns (status, step, training seconds).

        Args:
            stop_reason: "stopped" or "interrupted" once the engine asks the run to
                stop (the status it ends with); None while it may train on.
            paused: Whether the run should be paused.
            pause_at: The step the run should pause once it has taken (`Engine.pause`'s
                `at_step`), until the engine has seen it paused there; None for none.
            updates: The live knob changes the engine took since the last relay, oldest
                first, each the knobs of one change (`{name: value}`), applied together
                at one step.
        """
        if stop_reason is not None:
            self.control.request_stop(stop_reason)
        if pause_at is not None and pause_at != self.asked_pause_at:
            self.asked_pause_at = pause_at
            self.control.request_pause_at(pause_at)
        # Paused at the step still asked, which the engine has not seen yet: it stays so.
        reached = pause_at is not None and pause_at == self.asked_pause_at
        reached = reached and self.control.pause_at is None and self.control.step >= pause_at
        if paused != self.control.paused and not (reached and self.control.paused):
            self.control.request_pause(paused)
        for update in updates:
            self.control.updates.put(update)
        return self.control.status, self.control.step, self.control.training_seconds


def _size(node: Mapping[str, Any]) -> tuple[float, float]:
    """A node's CPUs and GPUs, from its record in `ray.nodes()`."""
    resources = node["Resources"]
    return float(resources.get("CPU", 0.0)), float(resources.get("GPU", 0.0))


def check_reachable(address: str, timeout: float = CONNECT_SECONDS) -> None:
    """Raises `ClusterError` unless something answers at `address` (`HOST:PORT`;
    `auto` and `local` are Ray's to resolve)."""
    if address in ("auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(f"ray_address: must be HOST:PORT (got {address!r})")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ClusterError(
            f"ray_address: no Ray cluster answers at {address} ({exc.strerror or exc}); "
            "start one with `ray start --head`"
        ) from None


def use_token_if_any() -> None:
    """Ray's token authentication for joining a cluster whenever a token is at hand
    (`RAY_AUTH_TOKEN`, `RAY_AUTH_TOKEN_PATH` or `~/.ray/auth_token`) and `RAY_AUTH_MODE` is
    not set: as Ray does itself for `ray.init("auto")`, not for an address. A cluster that
    asks for the token (`ray start --head` does once a token file exists) then takes this
    process, and one that does not takes it as well. Sets `RAY_AUTH_MODE` for the process."""
    from ray._raylet import AuthenticationTokenLoader

    if AUTH_MODE_VAR not in os.environ and AuthenticationTokenLoader.instance().has_token(
        ignore_auth_mode=True
    ):
        os.environ[AUTH_MODE_VAR] = "token"
        _reload_auth()


@contextlib.contextmanager
def own_token() -> Iterator[str]:
    """Token authentication with a fresh token, for the clusters started and joined in the
    block (their nodes, and the processes started meanwhile, inherit it): `RAY_AUTH_MODE`
    and `RAY_AUTH_TOKEN` set in this process until it ends. Such a cluster neither reads nor
    writes `~/.ray/auth_token`, whether it exists or not. Yields the token."""
    token = secrets.token_hex(32)  # what `ray get-auth-token --generate` makes
    saved = {name: os.environ.get(name) for name in (AUTH_MODE_VAR, TOKEN_VAR)}
    os.environ.update({AUTH_MODE_VAR: "token", TOKEN_VAR: token})
    _reload_auth()
    try:
        yield token
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        _reload_auth()


def _reload_auth() -> None:
    """Has Ray read its authentication settings (which it reads once a process) and its
    token again, from the environment."""
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def node_name(ray: Any) -> str:
    """The name of the Ray node this process runs on (`ray start --node-name`; by
    default the node's IP address)."""
    node_id = ray.get_runtime_context().get_node_id()
    names = [n["NodeName"] for n in ray.nodes() if n["NodeID"] == node_id]
    return names[0] if names else socket.gethostname()


def remote_nodes(nodes: list[dict[str, Any]], here: str) -> list[str]:
    """The live nodes of `nodes` (as `ray.nodes()` gives them) on another machine than
    `here` (this machine's IP address), by name."""
    return [n["NodeName"] for n in nodes if n["Alive"] and n["NodeManagerAddress"] != here]


def _join_failure(exc: Exception) -> str:
    """Why joining failed; for a token Ray asked for and did not get (a missing one, or
    another cluster's), how to give it."""
    if "InvalidAuthToken" in str(exc.__cause__) or "no authentication token" in str(exc):
        return (
            "the cluster asks for its token: set RAY_AUTH_MODE=token and give this machine "
            "the head's token (`ray get-auth-token` there) as ~/.ray/auth_token or "
            'RAY_AUTH_TOKEN (see docs/scaling.md, "Scale out")'
        )
    return str(exc)


def _passed_env() -> dict[str, str]:
    return {name: os.environ[name] for name in PASSED_VARS if os.environ.get(name)}


def _drain(control: RunControl) -> list[dict[str, float]]:
    updates = []
    while True:
        try:
            updates.append(control.updates.get_nowait())
        except queue.Empty:
            return updates


def _lost(store: Store, control: RunControl, exc: Exception) -> None:
    """Ends the run of an actor that died: `failed` if it could not start (its node
    could not import the lab or open the store), else `interrupted`, with what the store
    holds of it."""
    try:
        steps = store.last_step(control.run_id) or control.step
    except StoreError:
        steps = control.step
    if getattr(exc, "actor_init_failed", False):
        status = "failed"
        error = f"its Ray actor could not start on its node: {_reason(exc)}"
    else:
        status = "interrupted"
        error = (
            f"its Ray actor died (node lost or process killed) after step {steps}: "
            f"{type(exc).__name__}"
        )
    _end(store, control, status, error, steps)


def _end(
    store: Store,
    control: RunControl,
    status: str,
    error: str | None = None,
    steps: int | None = None,
) -> None:
    """Ends the run with `status` and `error` from this side, its actor gone or never
    placed. Kept in memory if the store cannot take it now, and written with its next
    write."""
    control.status = status
    store.finish(control.run_id, status, {"steps": control.step if steps is None else steps}, error)


def _reason(exc: Exception) -> str:
    """`Type: message` of what a Ray error carries from the actor: its cause, or the
    last exception line of its text (an actor's failed start carries only text)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__}: {cause}".strip()
    found = [m for line in str(exc).splitlines() if (m := _EXCEPTION_LINE.match(line.strip()))]
    return ": ".join(found[-1].groups()) if found else str(exc).strip()
