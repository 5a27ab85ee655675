"""Optuna's tables, created by several processes at once on one fresh store (a sweep
started from the CLI while the dashboard lists the studies, or two machines' workers):
every process opens the storage, none fails on a table another made first."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.app_server import ROOT
from tests.waiting import scaled

PROCESSES = 8
# Each process imports first, says so, then waits for a line: they open the storage at once.
OPEN_TOGETHER = textwrap.dedent(
    """
    import sys
    from core.sweep.studies import open_storage
    print("ready", flush=True)
    sys.stdin.readline()
    open_storage(sys.argv[1]).get_all_studies()
    """
)


def test_processes_that_create_the_tables_at_once_all_open_the_storage(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'lab.sqlite'}"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_TOGETHER, url],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    assert [process.stdout.readline() for process in processes] == ["ready\n"] * PROCESSES
    for process in processes:  # all imported: go
        process.stdin.write("go\n")
        process.stdin.flush()
    errors = [process.communicate(timeout=scaled(120))[1] for process in processes]
    assert [process.returncode for process in processes] == [0] * PROCESSES, errors
