"""TensorFlow's thread pools for an engine process, chosen from its cores and its runs.

TensorFlow gives a process one intra-op pool as wide as the machine. Its kernels split
work across the pool and wait at a barrier for every part; when several runs train at
once on fewer cores than they would use, or the browser and the page server take a core,
each split waits for a thread that is not running, and training stalls while the cores
sit idle (issue 43 measured the demo race watched in two tabs: 20.7 s with the defaults,
15.2 s with one thread an op). So an engine that may train at least as many runs at once
as it has cores gives each op one thread: the runs themselves keep the cores busy. Its
inter-op pool, which runs the ops of every run's steps, stays as wide as the cores: one
thread there made the runs take turns (three LeNet runs at once on 2 cores: 150 steps/s
with one inter-op thread, 156 with the defaults, 210 with one intra-op thread and two
inter-op threads; medians of 3). An engine with cores to spare per run keeps TensorFlow's
defaults.

The pools are made when TensorFlow first runs an op, so this is set before the engine
imports TensorFlow; a variable the user set wins.
"""

from __future__ import annotations

import os
from typing import Final

INTRA_OP: Final = "TF_NUM_INTRAOP_THREADS"
INTER_OP: Final = "TF_NUM_INTEROP_THREADS"


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def pool_sizes(runs_at_once: int, cores: int) -> dict[str, str]:
    """The thread variables for an engine of `runs_at_once` runs on `cores` cores: one
    intra-op thread, and an inter-op thread a core, when the runs fill the cores; none set
    (TensorFlow's defaults) else."""
    if runs_at_once < cores:
        return {}
    return {INTRA_OP: "1", INTER_OP: str(cores)}


def share_cores(runs_at_once: int) -> dict[str, str]:
    """Sets the thread variables this engine process should train with (see the module
    docstring), unless the user set either; returns those it set."""
    if INTRA_OP in os.environ or INTER_OP in os.environ:
        return {}
    chosen = pool_sizes(runs_at_once, available_cores())
    os.environ.update(chosen)
    return chosen
