"""Every figure of the bench: its number, what it measures, its target, and its code.

The targets live here and only here, next to the figure's name, so that they can be read
(and reviewed) in one place; the figure functions only measure. A figure function takes
the run's `Settings` and returns a `Measured`. It is named as `"module:function"` and
imported only when it runs, so `--only 6` does not load TensorFlow.

To add a figure, write its function in the module of its group and add a line below.
"""

from __future__ import annotations

import gc
import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from bench.rows import Measured, Target
from bench.timing import Paired, Sampler, interleave
from core.cli.serving import DEFAULT_MAX_CONCURRENT

T = TypeVar("T")


@dataclass(frozen=True)
class Settings:
    """How much each figure measures.

    Attributes:
        pairs: Measured pairs per comparison, at least (5 for results).
        most: Measured pairs per comparison, at most: more than `pairs` are taken only
            while they do not judge the figure's `target` (see `interleave`).
        warmup: Pairs run and dropped before them.
        quick: Smaller workloads, for a smoke test; its numbers are not results.
        target: The target of the figure being measured, if any (`bench.__main__` sets
            it for each figure).
    """

    pairs: int
    most: int | None = None
    warmup: int = 1
    quick: bool = False
    target: Target | None = None

    def pick(self, full: T, quick: T) -> T:
        """The workload size for this run: `full`, or `quick` in a quick run."""
        return quick if self.quick else full

    def interleave(
        self, a: Sampler, b: Sampler, *, settle: Callable[[], object] | None = gc.collect
    ) -> Paired:
        """`bench.timing.interleave` of `a` and `b` with these pairs and warm-up, `settle`
        called before every sample (untimed; by default a garbage collection): pairs past
        `pairs` are taken only while the figure's ratio target is not judged by them
        (`Target.judged_by`), or, without a ratio target, while their spread is wide."""
        judged = None
        if self.target is not None and self.target.on == "ratio":
            judged = self.target.judged_by
        return interleave(
            a,
            b,
            pairs=self.pairs,
            warmup=self.warmup,
            settle=settle,
            most=self.most,
            judged=judged,
        )


# A full run takes the 5 pairs results need, and up to 9 where they straddle a target:
# this machine is shared, and its load moves.
FULL = Settings(pairs=5, most=9)
QUICK = Settings(pairs=2, most=2, quick=True)


@dataclass(frozen=True)
class Figure:
    """One row of the results table, before it is measured.

    Attributes:
        number: The figure's number in the issue; `--only` selects by it.
        label: The number as shown, with a suffix for a secondary row (`"3 ref"`).
        name: What is measured, naming A and B.
        target: The bound the row is held to, or `None` for a row reported without one.
        function: `"module:function"` of the code that measures it.
    """

    number: int
    label: str
    name: str
    target: Target | None
    function: str

    def load(self) -> Callable[[Settings], Measured]:
        """The figure function, imported now."""
        module, _, name = self.function.partition(":")
        return getattr(importlib.import_module(module), name)


FIGURES: tuple[Figure, ...] = (
    Figure(
        1,
        "1",
        "Training steps/s, LeNet mnist-5k batch 64: engine with telemetry every step (A) "
        "vs Keras model.fit with AdamW (B)",
        Target(">=", 1.0),
        "bench.training:engine_vs_keras",
    ),
    Figure(
        2,
        "2",
        "Time per training step over 25 epochs, LeNet (10 variables): engine with telemetry "
        "every step (A) vs telemetry off (B)",
        Target("<=", 1.10),
        "bench.training:telemetry_cost",
    ),
    Figure(
        2,
        "2 deep",
        "Time per training step over 25 epochs, an MLP of 100 variables (bench/models.py): "
        "engine with telemetry every step (A) vs telemetry off (B)",
        Target("<=", 1.10),
        "bench.training:telemetry_cost_deep_mlp",
    ),
    Figure(
        2,
        "2 vit",
        "Time per training step, the tiny ViT with 8 blocks (135 variables): engine with "
        "telemetry every step (A) vs telemetry off (B)",
        Target("<=", 1.10),
        "bench.training:telemetry_cost_deep_vit",
    ),
    Figure(
        3,
        "3",
        "Optimizer step, 10M-parameter MLP: projected_gd (A) vs keras.optimizers.SGD (B)",
        Target("<=", 1.05),
        "bench.optimizer_step:projected_gd",
    ),
    Figure(
        3,
        "3 xla",
        "Optimizer step, 10M-parameter MLP: projected_gd compiled by XLA (A) vs "
        "keras.optimizers.SGD (B)",
        None,
        "bench.optimizer_step:projected_gd_xla",
    ),
    Figure(
        3,
        "3 ref",
        "Optimizer step, 10M-parameter MLP: the articles' concatenate-and-split projected GD "
        "(A) vs keras.optimizers.SGD (B)",
        None,
        "bench.optimizer_step:concatenated_projected_gd",
    ),
    Figure(
        4,
        "4",
        "Optimizer step, 10M-parameter MLP: sgd with clip_norm=1 (A) vs "
        "keras.optimizers.SGD(global_clipnorm=1) (B)",
        Target("<=", 1.05),
        "bench.optimizer_step:clip_norm",
    ),
    Figure(
        5,
        "5",
        "Dashboard: building the Live page's figures for 4 runs × 50,000 steps (A), "
        "their JSON payload (B)",
        Target("<=", 0.250, on="a", unit="s"),
        "bench.dashboard:live_figures",
    ),
    Figure(
        6,
        "6a",
        "Store: telemetry rows (one per step) committed per second from a training thread",
        None,
        "bench.storage:write_rate",
    ),
    Figure(
        6,
        "6b",
        "Store: reading back the metrics of a 50,000-step run",
        Target("<=", 0.100, on="a", unit="s"),
        "bench.storage:read_time",
    ),
    Figure(
        7,
        "7",
        "Total steps/s of two LeNet runs of 300 steps: at once, max_concurrent=2 (A) vs "
        "one after the other (B)",
        Target(">=", 0.95),
        "bench.training:two_runs_at_once",
    ),
    Figure(
        8,
        "8",
        "Time per training step, LeNet mnist-5k: every instrument at its default interval "
        "(A) vs instruments off (B), telemetry on in both",
        Target("<=", 1.15),
        "bench.training:instrument_cost",
    ),
    Figure(
        8,
        "8 deep",
        "Time per training step, an MLP of 100 variables (bench/models.py): every "
        "instrument at its default interval (A) vs instruments off (B), telemetry on in both",
        Target("<=", 1.15),
        "bench.training:instrument_cost_deep_mlp",
    ),
    Figure(
        9,
        "9",
        "Training steps/s of a LeNet run with two browser tabs on its Live page (A) vs no "
        "tab (B); engine, page server and Chromium on the same cores",
        Target(">=", 0.90),
        "bench.watching:two_live_tabs",
    ),
    Figure(
        10,
        "10",
        "Time per training step, LeNet mnist-5k: checkpoints as often as the default "
        "schedule's 2% budget allows (A) vs checkpoints off (B)",
        Target("<=", 1.05),
        "bench.training:checkpoint_cost",
    ),
    Figure(
        11,
        "11",
        "Demo race: seconds from the click on Start the demo race to the end of its last run, "
        "watched by the Live tab it opens and a second one (engine warm)",
        Target("<=", 30.0, on="a", unit="s"),
        "bench.watching:demo_race",
    ),
    Figure(
        12,
        "12",
        "Steady steps/s of a LeNet run trained as a Ray actor asking for every core, on a "
        "one-node local cluster (A) vs as a thread of the engine (B)",
        Target(">=", 0.90),
        "bench.cluster:ray_actor_vs_thread",
    ),
    Figure(
        13,
        "13a",
        "Live chart refresh (read + Training figures) for 4 runs × 10M logged steps (A) vs "
        "4 runs × 10,000 (B)",
        Target("<=", 1.5),
        "bench.refresh:long_vs_short",
    ),
    Figure(
        13,
        "13b",
        "Live chart refresh (read + Training figures) for 4 runs × 10M logged steps",
        Target("<=", 0.050, on="a", unit="s"),
        "bench.refresh:long_refresh",
    ),
    *(
        Figure(
            14,
            f"14{suffix}",
            f"Total steps/s of 8 LeNet runs queued at once, start to end: at most {n} at a "
            f"time (A) vs at most {DEFAULT_MAX_CONCURRENT}, the default (B)",
            None,
            f"bench.many_runs:at_most_{n}",
        )
        for suffix, n in (("a", 2), ("b", 4), ("c", 8))
    ),
    Figure(
        15,
        "15",
        "Time to first point: Engine.start of the demo race's AdamW run to its first logged "
        "step in the store, in a fresh engine process after its warm-up",
        Target("<=", 2.0, on="a", unit="s"),
        "bench.first_point:start_to_first_point",
    ),
    Figure(
        16,
        "16a",
        "Optimizer step, Embedding(1M × 64) with the sparse gradient of 4,096 ids: adamw (A) "
        "vs keras.optimizers.AdamW (B)",
        Target("<=", 1.05),
        "bench.optimizer_step:embedding_adamw",
    ),
    Figure(
        16,
        "16b",
        "Optimizer step, Embedding(1M × 64) with the sparse gradient of 4,096 ids: sgd (A) "
        "vs keras.optimizers.SGD (B), which writes only the rows it touches",
        Target("<=", 1.5),
        "bench.optimizer_step:embedding_sgd",
    ),
    Figure(
        17,
        "17",
        "Steps/s of a LeNet run watched on Live by the presenter's Chromium tab and 20 "
        "viewer sessions (A) vs the presenter's tab alone (B); engine, page server and "
        "Chromium on the same cores",
        Target(">=", 0.90),
        "bench.viewers:presenter_and_room",
    ),
    Figure(
        18,
        "18",
        "Sweep trials per minute, 20 sgd trials of mlp on digits, 100 steps each: optlab "
        "sweep at its defaults (A) vs the same study as a plain Optuna script calling "
        "model.fit in one process (B), same sampler seed",
        Target(">=", 0.90),
        "bench.sweeping:trial_throughput",
    ),
    Figure(
        19,
        "19",
        "Steps trained by optlab sweep, 20 sgd trials of mlp on digits, learning rates 1e-5 "
        "to 1, 200 steps each: with the default median pruner (A) vs no pruner (B), at the "
        "same best validation accuracy",
        Target("<=", 0.70),
        "bench.sweeping:pruning",
    ),
    Figure(
        20,
        "20",
        "Playground: from a learning rate's change to the data of 3 trajectories × 500 steps "
        "on rosenbrock (sgd, momentum, adam) from the page server's worker process, their "
        "loops compiled",
        Target("<=", 0.200, on="a", unit="s"),
        "bench.playground:knob_change",
    ),
    Figure(
        21,
        "21",
        "Sweep page: knob importances of 100 trials of 3 knobs with their 16 bootstrap "
        "resamples, by the slower of PED-ANOVA and fANOVA",
        Target("<=", 10.0, on="a", unit="s"),
        "bench.importance:bootstrap_cost",
    ),
    Figure(
        22,
        "22",
        "Time per training step, MLP mnist-5k batch 64: DP-SGD with C = 1, σ = 1.1 (A) vs "
        "the same run without it (B), telemetry every step in both",
        Target("<=", 2.0),
        "bench.training:private_step_cost",
    ),
    Figure(
        22,
        "22 lenet",
        "Time per training step, LeNet mnist-5k batch 64: DP-SGD with C = 1, σ = 1.1 (A) vs "
        "the same run without it (B), telemetry every step in both",
        Target("<=", 4.0),
        "bench.training:private_step_cost_lenet",
    ),
    Figure(
        23,
        "23",
        "Best validation accuracy, LeNet mnist-5k, SGD's learning rate searched on "
        "0.001-1 (log): population-based training of 4 members (A) vs random search of 4 "
        "trials of the same steps (B), over 5 seeds",
        Target(">=", 1.0),
        "bench.population:pbt_vs_random_search",
    ),
    Figure(
        24,
        "24 deep",
        "Steps/s of a whole run of 1,500 AdamW steps (traces included), an MLP of 100 "
        "variables (kernels of 4,096 entries) on mnist-5k: telemetry every step, "
        "instruments off (A) vs telemetry off (B)",
        Target(">=", 0.90),
        "bench.training:whole_run_telemetry",
    ),
    Figure(
        24,
        "24 mixed",
        "Steps/s of a whole run of 1,500 AdamW steps (traces included), an MLP of 76 "
        "variables whose kernels are small, mid-size and large (1,024, 4,096 and 16,384 "
        "entries) on mnist-5k: telemetry every step, instruments off (A) vs telemetry off (B)",
        Target(">=", 0.90),
        "bench.training:whole_run_telemetry_mixed",
    ),
)


def select(numbers: Iterable[int] | None) -> list[Figure]:
    """The figures with these numbers (all when `None`), in table order.

    Raises `ValueError` naming any number that is not a figure.
    """
    if numbers is None:
        return list(FIGURES)
    wanted = set(numbers)
    unknown = wanted - {figure.number for figure in FIGURES}
    if unknown:
        known = ", ".join(str(n) for n in sorted({f.number for f in FIGURES}))
        raise ValueError(f"no figure {sorted(unknown)} (figures: {known})")
    return [figure for figure in FIGURES if figure.number in wanted]
