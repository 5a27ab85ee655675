"""The presenter's view, published through the store for a room's viewers to follow.

While a demo is given, the presenter's session writes what it shows (the page, the runs
shown, Live's group of charts, a page's own state) as a service row of the store's, beating
as any service does; a viewer reads the freshest, goes to that page and shows the same. A
view silent for `core.store.owner.LIVENESS_SECONDS` (the presenter closed the tab) is no
longer followed. Through the store, like every other thing that passes between processes:
a second page server (a room split over two machines, a restart) follows the same
presenter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from core.store import Store, StoreError
from core.store.owner import current

ROLE: Final = "presenter view"  # the service rows' role


@dataclass(frozen=True)
class PresenterView:
    """What the presenter shows: `page` (its address), the `runs` shown on it (those
    selected on Live, those of the recipe whose charts Recipes shows), on Live the
    group of `charts` ("Training", "Per layer", …), and a page's own `state`, as JSON
    text (the Playground's: its widgets' values and the step its chart shows)."""

    page: str
    runs: tuple[str, ...] = ()
    charts: str | None = None
    state: str | None = None

    @classmethod
    def from_info(cls, info: Mapping[str, Any]) -> PresenterView | None:
        """The view a service row holds; None for a row that holds none."""
        try:
            state = info.get("state")
            return cls(
                str(info["page"]),
                tuple(map(str, info["runs"])),
                info.get("charts"),
                state if isinstance(state, str) else None,
            )
        except (KeyError, TypeError):
            return None


def publish(store: Store, view: PresenterView) -> None:
    """Writes `view` as this process's presenter's (a page server serves one presenter
    key, so one presenter a process)."""
    info = {"page": view.page, "runs": list(view.runs), "charts": view.charts, "state": view.state}
    store.heartbeat(current("presenter"), ROLE, info)


def latest(store: Store) -> PresenterView | None:
    """The freshest presenter's view that still beats, None without one (or when the
    store cannot be read now: a viewer keeps what it shows)."""
    try:
        beating = store.beating(ROLE)
        rows = [row for row in store.services(ROLE) if row.owner in beating]
    except StoreError:
        return None
    views = (PresenterView.from_info(row.info) for row in sorted(rows, key=lambda r: -r.heartbeat))
    return next((view for view in views if view is not None), None)
