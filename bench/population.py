"""Figure 23: population-based training against random search, at the same steps.

Both are the lab's commands, each in its own process and a new store, read back from that
store once it has exited: `optlab pbt` (4 members, SGD's learning rate searched on a log
range, the bottom quarter copying the top at every interval's end) and `optlab sweep
--sampler random` (4 trials of the whole length, the same range, no pruning). Both train
4 × the members' length steps of LeNet on mnist-5k, with the same validation interval,
and are valued alike: the best validation accuracy any of their runs reached. A seed
seeds both sides (the population's draws and the sampler's; the runs' initial weights);
the figure is the median over seeds of each side's best, and their ratio, pair by pair.
A learning rate that should fall as training goes is where a schedule beats a constant.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench.figures import Settings
from bench.rows import Measured, NotMeasured
from bench.timing import Paired
from core.engine.client import EngineClient
from core.population.lineage import population_names, read_population
from core.store import Store
from core.training.instruments import INSTRUMENTS

RATES = "learning_rate=0.001:1:log"
NO_INSTRUMENTS = [
    flag for name in INSTRUMENTS for flag in (f"--{name.replace('_', '-')}-every", "0")
]
MEMBERS = 4
#: Seconds one side's command may take.
TIMEOUT = 1800


def pbt_vs_random_search(settings: Settings) -> Measured:
    """Figure 23: the best validation accuracy of a population and of a random search of
    the same steps, seed by seed."""
    model, dataset = settings.pick(("lenet", "mnist-5k"), ("mlp", "digits"))
    interval, generations = settings.pick((100, 6), (20, 3))
    seeds = settings.pick((0, 1, 2, 3, 4), (0,))
    steps = interval * generations
    common = [
        *("--model", model, "--dataset", dataset, "--optimizer", "sgd"),
        *("--param", RATES, "--val-every", str(interval)),
        *NO_INSTRUMENTS,  # the same on both sides; what is compared is the search
    ]
    pbt, search = [], []
    for seed in seeds:
        pbt.append(
            _best(
                "pbt",
                [
                    *common,
                    *("--population", str(MEMBERS), "--interval", str(interval)),
                    *("--generations", str(generations), "--population-seed", str(seed)),
                    *("--seed", str(seed), "--name", "bench"),
                ],
            )
        )
        search.append(
            _best(
                "sweep",
                [
                    *common,
                    *("--trials", str(MEMBERS), "--parallel", str(MEMBERS)),
                    *("--sampler", "random", "--sampler-seed", str(seed), "--seed", str(seed)),
                    *("--max-steps", str(steps), "--epochs", "10000", "--study", "bench"),
                ],
            )
        )
    paired = Paired(tuple(pbt), tuple(search))
    return Measured.compared(
        paired,
        "val_accuracy",
        detail=(
            f"{model} on {dataset}, sgd, {MEMBERS} members of {steps} steps (intervals of "
            f"{interval}) against {MEMBERS} random trials of {steps} steps, learning rate "
            f"0.001 to 1 (log), seeds {', '.join(map(str, seeds))}: best validation "
            f"accuracy, population / random search: "
            + ", ".join(f"{a:.4f} / {b:.4f}" for a, b in zip(pbt, search, strict=True))
            + f"; medians {statistics.median(pbt):.4f} / {statistics.median(search):.4f}."
        ),
    )


def _best(command: str, flags: list[str]) -> float:
    """The best validation accuracy any run of `optlab COMMAND FLAGS` reached, in a new
    store."""
    with tempfile.TemporaryDirectory() as folder:
        store_path = Path(folder) / "lab.sqlite"
        done = subprocess.run(
            [sys.executable, "-m", "core", command, "--store", str(store_path), *flags],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        if done.returncode != 0:
            raise NotMeasured(f"optlab {command} exited {done.returncode}: {done.stderr[-300:]}")
        with Store(store_path) as store:
            reader = EngineClient(store)
            if command == "pbt":
                (name,) = population_names(reader.list())
                view = read_population(reader, name)
                assert view is not None
                return max(value for _, value in view.best_over_time())
            return max(_best_of_run(reader, run.id) for run in reader.list())


def _best_of_run(reader: EngineClient, run_id: str) -> float:
    metrics = reader.metrics(run_id)
    if "val_accuracy" not in metrics:
        return float("nan")
    values = metrics["val_accuracy"]
    return float(np.nanmax(values)) if np.isfinite(values).any() else float("nan")
