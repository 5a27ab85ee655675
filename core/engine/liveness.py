"""Which processes serve the store: a service row judged by what this host can see.

Every process that serves the store in some role (the engine, a dashboard) has a row in
the store's `services` table, and beats its heartbeat there every `HEARTBEAT_SECONDS`
(see `core.store.owner`). A row is believed while

- its process is on another host (a shared PostgreSQL store): its heartbeat in that role
  is younger than `LIVENESS_SECONDS` by the database's clock, all that another host shows
  of it (the row's owner names the host, the pid and the process's start);
- its process is on this host: the process lives, by /proc (exactly, see
  `core.store.owner.alive`), and either its heartbeat in that role is young, or the row is
  an engine's and its process holds the store's engine lock (see `core.engine.lock`).

The lock is there for a loaded machine: an engine's heartbeat thread may then be kept
from beating for longer than `LIVENESS_SECONDS`. Were the engine judged dead, a dashboard
would launch another one and forget its row; as long as its process lives and holds the
lock, it is late, not dead. A live process that neither beats in the role nor holds the
lock (a row written by hand, or left by a process that stopped serving) serves nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Final

from core.engine import lock
from core.store import Service, Store, owner

ENGINE: Final = "engine"  # the service role of a process that takes new runs
DASHBOARD: Final = "dashboard"  # the role of a dashboard process, which keeps an engine alive


def serves(
    service: Service, beating: frozenset[str], lock_holder: Callable[[], str | None]
) -> bool:
    """Whether the process of `service`'s row still serves the store in its role (see the
    module docstring). `beating`: the owners whose rows of that role beat
    (`Store.beating`); `lock_holder()`: who holds the store's engine lock on this host,
    asked only of a silent engine row of this host."""
    holder = service.owner
    if not owner.on_this_host(holder):
        return holder in beating
    if not owner.alive(holder):
        return False
    return holder in beating or (service.role == ENGINE and lock_holder() == holder)


def live_service(store: Store, role: str) -> Service | None:
    """The most recently started service of `role` that still serves the store (see
    `serves`); the rows of `role` found dead on the way are removed, so a row written by
    hand, or left by a process that died, never takes a run."""
    beating, lock_holder = store.beating(role), _lock_holder(store)
    for service in store.services(role):
        if serves(service, beating, lock_holder):
            return service
        store.remove_service(service.owner, role)
    return None


def forget_dead(store: Store) -> list[Service]:
    """Removes the rows, of every role, whose process no longer serves the store (see
    `serves`), and returns them. A live process that was only late writes its row again
    with its next beat."""
    services, lock_holder = store.services(), _lock_holder(store)
    beating = {role: store.beating(role) for role in {service.role for service in services}}
    dead = [
        service for service in services if not serves(service, beating[service.role], lock_holder)
    ]
    for service in dead:
        store.remove_service(service.owner, service.role)
    return dead


def _lock_holder(store: Store) -> Callable[[], str | None]:
    return functools.partial(lock.holder, store.location)
