"""The one exception type the store raises for problems with its file or its data."""


class StoreError(Exception):
    """The store's file cannot be used, or something could not be read or written.

    The message says which file or run, and why; the SQLite error behind it, if any, is
    the exception's `__cause__`.
    """


class UnknownRunError(StoreError, LookupError):
    """No run with the given id is stored."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run_id: no run {run_id!r} in the store")
        self.run_id = run_id
