"""`Runs`: the verbs an `Engine` and an `EngineClient` both answer, as one interface.

A sweep, the dashboard's pages and its `ui/` modules are typed against `Runs`, so that
either drives them: an `Engine` in a script or a test, which trains the runs in its own
process, or the dashboard's `EngineClient`, which hands them to the engine process through
the store. Neither reaches through to the store: what they need of it (a command's answer,
the uploads folder, whose processes live) is a verb here.

The steering verbs (`stop`, `pause`, `resume`, `update`) return the `Command` a client
wrote for the run's process, to `settle`; an engine carries them out at once and returns
None.

Validation happens once per process boundary. In the dashboard: a form makes a
`RunConfig` (which validates it), and a client takes it as it is (a mapping it validates
itself); a fork's changes and live knob changes are validated by the client's `fork` and
`update`, the forms send them as typed. In the engine process: the engine validates
whatever comes through the store again, as anyone who can write the store can write it.

`python -m mypy` (in `make lint`) checks that both classes satisfy the protocol: see
`_conforms` below.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # types only: importing this module imports nothing of the engine
    from core.engine.checkpoints import Checkpoint
    from core.engine.client import EngineClient
    from core.engine.engine import Engine
    from core.engine.following import PresenterView
    from core.engine.landscape import Landscape
    from core.engine.read_only import ReadOnlyRuns
    from core.engine.status import RunStatus
    from core.store import Command, Event, Metrics
    from core.store.owner import Liveness
    from core.store.paths import Location
    from core.training.config import RunConfig


class Runs(Protocol):
    """Starts, steers and reads runs; see the module docstring."""

    # Where the runs live -------------------------------------------------------------

    @property
    def location(self) -> Location:
        """Where the store lives: its SQLite file, or its PostgreSQL URL."""
        ...

    @property
    def datasets_folder(self) -> Path:
        """Where datasets uploaded from the dashboard are kept."""
        ...

    def liveness(self) -> Liveness:
        """Whether the processes that own runs live."""
        ...

    def cluster_info(self) -> dict[str, Any] | None:
        """The Ray cluster the runs train on (see `EngineClient.cluster_info`); None
        without one."""
        ...

    def loading(self) -> str | None:
        """What the engine loads before it can train a run handed to it now (e.g.
        "TensorFlow", as it starts); None once it can."""
        ...

    def room(self, config: RunConfig) -> int | None:
        """How many runs like `config` the engine trains at once: its `max_concurrent`,
        fewer on a Ray cluster whose live nodes hold fewer of the runs' `num_cpus` and
        `num_gpus`; None with no engine to ask."""
        ...

    # Starting and steering -----------------------------------------------------------

    def start(self, config: RunConfig | Mapping[str, Any]) -> str:
        """Queues a run; returns its id. Raises `InvalidInput` naming each bad field."""
        ...

    def start_all(self, configs: Iterable[RunConfig | Mapping[str, Any]]) -> builtins.list[str]:
        """Queues runs together (repeats, a race), whole or not at all; returns their ids."""
        ...

    def fork(self, run_id: str, step: int, **changes: Any) -> str:
        """Starts a fork of `run_id` from its checkpoint of `step`; returns its id."""
        ...

    def stop(self, run_id: str) -> Command | None:
        """Stops a run within one step."""
        ...

    def pause(self, run_id: str, at_step: int | None = None) -> Command | None:
        """Pauses a run after its current step, or once it has taken `at_step`."""
        ...

    def resume(self, run_id: str) -> Command | None:
        """Unpauses a paused run, or continues an ended one from its last checkpoint."""
        ...

    def update(self, run_id: str, **knobs: float) -> Command | None:
        """Changes live knobs from the run's next step on."""
        ...

    def settle(self, command: Command, timeout: float = 2.0) -> Command:
        """`command` once the run's process has handled it (or after `timeout` seconds)."""
        ...

    def get_command(self, command_id: int) -> Command | None:
        """A command written to the store, as it is now."""
        ...

    def delete(self, run_id: str) -> None:
        """Deletes an ended run with its metrics, events and checkpoints."""
        ...

    def set_tags(self, run_id: str, tags: Iterable[str]) -> None:
        """Replaces the run's tags."""
        ...

    def record_launch(self, run_ids: Sequence[str], launch: Mapping[str, Any]) -> None:
        """Records on each run the launch they were started in together (a recipe's)."""
        ...

    def steer_sweeps(self) -> None:
        """Passes when this caller may start, stop and resume sweeps; raises
        `NotAllowed` for a viewer. A sweep is steered through its study, beside these
        verbs (commands the engine process carries out: see `core.sweep.control`), and
        asks here before it writes anything."""
        ...

    # Reading -------------------------------------------------------------------------

    def status(self, run_id: str) -> RunStatus:
        """The run as it is now; raises `UnknownRunError` for no such run."""
        ...

    def list(self) -> builtins.list[RunStatus]:
        """Every run, newest first."""
        ...

    def metrics(self, run_id: str, since_step: int | None = None) -> Metrics:
        """The run's logged metrics, only those after `since_step` when given."""
        ...

    def overview(
        self,
        run_id: str,
        *,
        start: int | None = None,
        end: int | None = None,
        means: bool = False,
    ) -> Metrics:
        """The run's metrics from step `start` to `end`, at a resolution for a chart."""
        ...

    def last_logged_step(self, run_id: str) -> int | None:
        """The largest step of the run's stored metrics, None before its first."""
        ...

    def publish_view(self, view: PresenterView) -> None:
        """Writes what the presenter shows, for a room's viewers to follow."""
        ...

    def presenter_view(self) -> PresenterView | None:
        """What the presenter shows now; None when no presenter's view beats."""
        ...

    def events(self, run_id: str, kind: str | None = None) -> builtins.list[Event]:
        """Knob changes, pauses, divergence, fingerprints and launches, by step; only
        those of `kind` when given."""
        ...

    def checkpoints(self, run_id: str) -> builtins.list[Checkpoint]:
        """The run's saved checkpoints, by step."""
        ...

    def disk_bytes(self, run_id: str) -> int:
        """What the run's checkpoints take on disk."""
        ...

    def model_file(self, run_id: str, checkpoint: str = "last") -> Path:
        """The run's model at `checkpoint` as a `.keras` file."""
        ...

    def landscape(self, run_id: str, step: int) -> Landscape | None:
        """The loss landscape of a checkpoint, if computed."""
        ...

    def ask_landscape(self, run_id: str, step: int) -> Command:
        """Asks for the loss landscape of a checkpoint, computed in the background."""
        ...

    def landscape_progress(self, run_id: str, step: int) -> float | None:
        """The fraction computed of a landscape under way; None when none is."""
        ...


def _conforms(engine: Engine, client: EngineClient, viewer: ReadOnlyRuns) -> None:
    """Never called: mypy checks here that the classes satisfy `Runs` (a viewer's
    read-only wrapper too), and names each verb one of them lacks or answers with another
    signature."""
    local: Runs = engine
    handing_over: Runs = client
    watching: Runs = viewer
    del local, handing_over, watching
