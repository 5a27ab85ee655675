"""The exceptions of the store: `StoreError` for its users, `LocationError` for a location
that is no store's, and the database's own errors as the two backends (SQLite,
PostgreSQL) share them inside the store."""

from core.knobs import InvalidInput


class StoreError(Exception):
    """The store's file cannot be used, or something could not be read or written.

    The message says which store or run, and why; the database error behind it, if any,
    is the exception's `__cause__`.
    """


class LocationError(InvalidInput, StoreError):
    """A store's location that is neither a path nor a URL of a store; its field is
    `store`, and its message quotes no part of the location that may hold a secret."""

    def __init__(self, why: str) -> None:
        super().__init__({"store": why})


class UnknownRunError(StoreError, LookupError):
    """No run with the given id is stored."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run_id: no run {run_id!r} in the store")
        self.run_id = run_id


class DatabaseError(Exception):
    """An error of the database under the store, whichever it is (its own error is the
    `__cause__`). `transient` when the same write may succeed later: a lock held too
    long, a full disk, a read-only file, a server that went away."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


class ConstraintError(DatabaseError):
    """A write broke a constraint: a duplicate key, or a reference to no row."""

    def __init__(self, message: str) -> None:
        super().__init__(message, transient=False)
