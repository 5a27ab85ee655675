"""The command line's exit statuses and its one way to report bad input."""

from __future__ import annotations

import sys

from core.redaction import redacted

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C

#: The exit statuses, as the `--help` of the commands that train shows them.
EPILOG = """exit status:
  0    done; for train, the run completed
  1    the run diverged or failed
  2    bad input (flags, config, --config file, unknown run, missing or corrupt store);
       train then writes nothing
  130  Ctrl-C; train stops its run first
"""


class UsageError(Exception):
    """Bad input: reported as one `error: field: reason` line, with exit status 2."""


def report(message: str) -> None:
    """`message` as an `error:` line on stderr, without the secrets of any URL it quotes
    (see `core.redaction`)."""
    print(f"error: {redacted(message)}", file=sys.stderr, flush=True)
