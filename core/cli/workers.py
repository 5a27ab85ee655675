"""Which worker of a multi-worker run this process is, read from `TF_CONFIG`.

A `strategy=multiworker` run trains in several processes at once, one per worker of the
cluster that `TF_CONFIG` names, each running the same command (`optlab train
--strategy multiworker ...`); `tf.distribute.MultiWorkerMirroredStrategy` keeps them in
step, each worker taking its share of every global batch. The chief (the task of type
`chief`, else worker 0) records the run in the store; the others train beside it without
recording it: their losses and metrics are the chief's, all-reduced.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

from core.knobs import InvalidInput

VAR = "TF_CONFIG"


@dataclass(frozen=True)
class Worker:
    """This process's place in the cluster: its task, and how many tasks train."""

    task: str  # "chief" or "worker"
    index: int
    tasks: int
    has_chief: bool = False  # whether the cluster names a chief task

    @property
    def chief(self) -> bool:
        """Whether this process records the run: the chief, else worker 0."""
        if self.has_chief:
            return self.task == "chief"
        return self.task == "worker" and self.index == 0

    def __str__(self) -> str:
        return f"{self.task} {self.index} of {self.tasks} tasks"


def this_worker(environ: Mapping[str, str] = os.environ) -> Worker:
    """This process's task, from `TF_CONFIG` (without it: the only worker, the chief).
    Raises `InvalidInput` naming `strategy` when `TF_CONFIG` cannot be read."""
    text = environ.get(VAR)
    if not text:
        return Worker("worker", 0, 1)
    try:
        config = json.loads(text)
        cluster, task = config["cluster"], config["task"]
        kind, index = task["type"], int(task["index"])
        tasks = sum(len(cluster.get(name, [])) for name in ("chief", "worker"))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InvalidInput(
            {"strategy": f"multiworker needs {VAR} as tf.distribute reads it ({exc!r})"}
        ) from None
    return Worker(kind, index, tasks, has_chief="chief" in cluster)
