"""`ReadOnlyRuns`: the `Runs` a viewer of a live demo gets, which reads and never acts.

A room watches the presenter's runs through `optlab present`; a viewer's session is handed
this wrapper instead of the engine client, so that every action a page could send (a
click, or a widget event forged by hand) is refused here, before anything is written. Each
verb of `Runs` is named once below, as a read it forwards or an action it refuses: a verb
added to `Runs` and not named here fails mypy's conformance check (`api._conforms`) and
the test that holds `READS | ACTIONS` equal to the protocol's verbs.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn

if TYPE_CHECKING:
    from core.engine.api import Runs
    from core.engine.checkpoints import Checkpoint
    from core.engine.following import PresenterView
    from core.engine.landscape import Landscape
    from core.engine.status import RunStatus
    from core.store import Command, Event, Metrics
    from core.store.owner import Liveness
    from core.store.paths import Location
    from core.training.config import RunConfig

#: The verbs of `Runs` a viewer may call: they read what is there and write nothing.
READS: Final = frozenset(
    {
        "location",
        "liveness",
        "cluster_info",
        "loading",
        "room",
        "settle",
        "get_command",
        "status",
        "list",
        "metrics",
        "overview",
        "events",
        "checkpoints",
        "disk_bytes",
        "landscape",
        "landscape_progress",
        "last_logged_step",
        "presenter_view",
    }
)
#: The verbs a viewer may not call, with what each would have done. `datasets_folder` is
#: where uploads are written, and `model_file` writes a model to the server's disk.
ACTIONS: Final = {
    "datasets_folder": "upload a dataset",
    "start": "start a run",
    "start_all": "start runs",
    "fork": "fork a run",
    "stop": "stop a run",
    "pause": "pause a run",
    "resume": "resume a run",
    "update": "change a run's knobs",
    "delete": "delete a run",
    "set_tags": "tag a run",
    "record_launch": "record a recipe's launch",
    "model_file": "export a model to the server's disk",
    "ask_landscape": "compute a loss landscape",
    "publish_view": "publish the view the room follows",
    "steer_sweeps": "start, stop or resume a sweep",
}


class NotAllowed(PermissionError):
    """An action asked by a session that may only watch (a viewer of a live demo)."""

    def __init__(self, action: str) -> None:
        super().__init__(f"Only the presenter can {action}: this session watches.")
        self.action = action


class ReadOnlyRuns:
    """`runs` for a viewer: every read forwarded, every action refused with `NotAllowed`."""

    def __init__(self, runs: Runs) -> None:
        self._runs = runs

    def _refuse(self, verb: str) -> NoReturn:
        raise NotAllowed(ACTIONS[verb])

    # Reads ---------------------------------------------------------------------------

    @property
    def location(self) -> Location:
        return self._runs.location

    def liveness(self) -> Liveness:
        return self._runs.liveness()

    def cluster_info(self) -> dict[str, Any] | None:
        return self._runs.cluster_info()

    def loading(self) -> str | None:
        return self._runs.loading()

    def room(self, config: RunConfig) -> int | None:
        return self._runs.room(config)

    def settle(self, command: Command, timeout: float = 2.0) -> Command:
        return self._runs.settle(command, timeout)

    def get_command(self, command_id: int) -> Command | None:
        return self._runs.get_command(command_id)

    def status(self, run_id: str) -> RunStatus:
        return self._runs.status(run_id)

    def list(self) -> builtins.list[RunStatus]:
        return self._runs.list()

    def metrics(self, run_id: str, since_step: int | None = None) -> Metrics:
        return self._runs.metrics(run_id, since_step)

    def overview(
        self,
        run_id: str,
        *,
        start: int | None = None,
        end: int | None = None,
        means: bool = False,
    ) -> Metrics:
        return self._runs.overview(run_id, start=start, end=end, means=means)

    def events(self, run_id: str, kind: str | None = None) -> builtins.list[Event]:
        return self._runs.events(run_id, kind)

    def checkpoints(self, run_id: str) -> builtins.list[Checkpoint]:
        return self._runs.checkpoints(run_id)

    def disk_bytes(self, run_id: str) -> int:
        return self._runs.disk_bytes(run_id)

    def landscape(self, run_id: str, step: int) -> Landscape | None:
        return self._runs.landscape(run_id, step)

    def landscape_progress(self, run_id: str, step: int) -> float | None:
        return self._runs.landscape_progress(run_id, step)

    def last_logged_step(self, run_id: str) -> int | None:
        return self._runs.last_logged_step(run_id)

    def presenter_view(self) -> PresenterView | None:
        return self._runs.presenter_view()

    # Actions: refused ----------------------------------------------------------------

    @property
    def datasets_folder(self) -> Path:
        self._refuse("datasets_folder")

    def start(self, config: RunConfig | Mapping[str, Any]) -> str:
        self._refuse("start")

    def start_all(self, configs: Iterable[RunConfig | Mapping[str, Any]]) -> builtins.list[str]:
        self._refuse("start_all")

    def fork(self, run_id: str, step: int, **changes: Any) -> str:
        self._refuse("fork")

    def stop(self, run_id: str) -> Command | None:
        self._refuse("stop")

    def pause(self, run_id: str, at_step: int | None = None) -> Command | None:
        self._refuse("pause")

    def resume(self, run_id: str) -> Command | None:
        self._refuse("resume")

    def update(self, run_id: str, **knobs: float) -> Command | None:
        self._refuse("update")

    def delete(self, run_id: str) -> None:
        self._refuse("delete")

    def set_tags(self, run_id: str, tags: Iterable[str]) -> None:
        self._refuse("set_tags")

    def record_launch(self, run_ids: Sequence[str], launch: Mapping[str, Any]) -> None:
        self._refuse("record_launch")

    def model_file(self, run_id: str, checkpoint: str = "last") -> Path:
        self._refuse("model_file")

    def ask_landscape(self, run_id: str, step: int) -> Command:
        self._refuse("ask_landscape")

    def publish_view(self, view: PresenterView) -> None:
        self._refuse("publish_view")

    def steer_sweeps(self) -> None:
        self._refuse("steer_sweeps")
