"""Figures 1, 2, 7, 8, 10 and 24: the engine's training speed against Keras, itself, in
parallel, with its instruments and with its checkpoints.

All of them train LeNet on mnist-5k at batch 64 through `core.engine.Engine`, with its
store on a temporary file, and time steps with a `ClockedStore`. Figures 1 and 2 time the
steady part of each run: from the end of the first epoch (tracing and warm-up done) to the
end of the last whole epoch before the final step (whose validation is left out). Keras
is timed over the same window of the same number of batches, by a callback.

The engine's instruments (alpha, sharpness, noise scale, histograms) are off but in
figure 8, which is about them; the others are about training, telemetry and checkpoints.

Every run leaves its model and traced graphs in reference cycles that only a full garbage
collection frees, and in a process that has trained a few runs a full collection takes
seconds, with every thread stopped. So garbage is collected before each sample, untimed:
otherwise one sample in a few would carry a collection of the others' garbage.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import keras

from bench import models as bench_models
from bench import profiling
from bench.figures import Settings
from bench.machine import available_cores
from bench.rows import Measured
from bench.sampler import StackSampler
from bench.step_clock import ClockedStore
from bench.timing import Paired, Sampler
from core import data, models
from core.engine import Engine, RunConfig, RunStatus, checkpoints, execution
from core.training.config import instrument_intervals
from core.training.instruments import INSTRUMENTS
from core.training.per_layer_schedule import per_layer_schedule

MODEL = "lenet"
DATASET = "mnist-5k"
BATCH = 64
LEARNING_RATE = 1e-3
# Epochs timed by figure 2 after the first: 1,950 steps of mnist-5k at batch 64.
LONG_RUN = 25
# Figure 24's runs: as long as the issue that asked for it measured (issue 57).
WHOLE_RUN_STEPS = 1500
# Seconds one run may take before its figure gives up and fails.
RUN_TIMEOUT = 300.0
# Calls of the run loop named when explaining where a step's time goes.
PROFILE_TOP = 5
# Warm steps whose op time is profiled when explaining a figure.
PROFILED_STEPS = 50
# These figures time training and telemetry; what the instruments cost is figure 8's.
INSTRUMENTS_OFF = {f"{name}_every": 0 for name in INSTRUMENTS}


def engine_vs_keras(settings: Settings) -> Measured:
    """Figure 1: steady steps/s of the engine (telemetry every step) and of `model.fit`."""
    first, last = _window(settings)
    config = _config(last + 1, telemetry=True)
    with _clocked_engine() as (engine, store):
        paired = settings.interleave(
            _engine_rate(engine, store, config, first, last), _keras_rate(first, last)
        )
    keras_step = 1 / paired.b_median

    def diagnose() -> str:
        ours, theirs = _trainer_ops(config), _keras_ops()
        return (
            "Sampled in one more run, an engine step took "
            f"{_engine_profile(config, first, last)}; "
            f"a Keras fit step took {keras_step * 1e3:.2f} ms in the figure. Profiled with "
            f"tf.profiler, an engine step spends {ours.summary()}; a Keras step "
            f"{theirs.summary()}; the engine's op time over Keras's: "
            f"{ours.excess_over(theirs)}."
        )

    return Measured.compared(paired, "steps/s", diagnose=diagnose)


def telemetry_cost(settings: Settings, model: str = MODEL, epochs: int = LONG_RUN) -> Measured:
    """Figure 2: seconds per step with telemetry every step (the per-layer statistics at
    their budget's interval), and with it off, over `epochs` epochs after the first.

    The runs are long: a run spaces its per-layer statistics only once the rest of it can
    pay for tracing a step without them (`core.training.per_layer_schedule`), and on the
    100-variable MLP that trace takes 2.2 s, so a run of 5 epochs keeps them at every step
    (it ends sooner so) and would show their whole cost, not the budget's."""
    first, last = _window(settings, epochs)
    on_config = _config(last + 1, telemetry=True, model=model)
    # Off, a row is still logged once an epoch: the clock needs both window ends.
    off_config = _config(last + 1, telemetry=False, log_every=first, model=model)
    return _step_times(settings, (on_config, off_config), first, last, "telemetry", ops=True)


def telemetry_cost_deep_mlp(settings: Settings) -> Measured:
    """Figure 2 on a model of 100 variables (`bench.models.deep_mlp`)."""
    bench_models.register()
    return telemetry_cost(settings, bench_models.DEEP_MLP)


def telemetry_cost_deep_vit(settings: Settings) -> Measured:
    """Figure 2 on the tiny ViT with 8 blocks (`bench.models`), over 4 epochs: a step of
    it takes 26 ms, so they outlast its traces."""
    bench_models.register()
    return telemetry_cost(settings, bench_models.DEEP_VIT, epochs=4)


def whole_run_telemetry(settings: Settings, model: str = bench_models.DEEP_MLP) -> Measured:
    """Figure 24: the steps/s a whole run records (`optlab train`'s), traces included, of
    `WHOLE_RUN_STEPS` AdamW steps with telemetry every step and the instruments off, and
    with telemetry off: what a short run pays for telemetry's traced branches and its
    per-step norms, where a long run's steady part hides the traces."""
    bench_models.register()
    steps = settings.pick(WHOLE_RUN_STEPS, 100)
    on = _config(steps, telemetry=True, model=model)
    off = _config(steps, telemetry=False, model=model)
    with _clocked_engine() as (engine, _):

        def rate(config: RunConfig) -> Sampler:
            def sample() -> float:
                status = _wait(engine, engine.start(config))
                assert status.steps_per_second is not None
                return status.steps_per_second

            return sample

        paired = settings.interleave(rate(on), rate(off))
    return Measured.compared(paired, "steps/s")


def whole_run_telemetry_mixed(settings: Settings) -> Measured:
    """Figure 24 on `bench.models.mixed_mlp`: small, mid-size and large kernels."""
    return whole_run_telemetry(settings, bench_models.MIXED_MLP)


def instrument_cost_deep_mlp(settings: Settings) -> Measured:
    """Figure 8 on a model of 100 variables (`bench.models.deep_mlp`)."""
    bench_models.register()
    return instrument_cost(settings, bench_models.DEEP_MLP)


def instrument_cost(settings: Settings, model: str = MODEL) -> Measured:
    """Figure 8: seconds per step with every instrument at its default interval (scaled
    to a 2,000-step run: see `instrument_intervals`), and with the instruments off
    (telemetry on, logged every step, in both).

    The window is one whole longest interval (the sharpness's), so every instrument
    measures in it as often as it does on average over the run, and it starts after one
    such interval, once each kind of step has been traced (a one-time cost at the start
    of a run, which a long run amortizes).
    """
    length = 500 if settings.quick else 2000  # steps of the run the defaults scale to
    off_config = _config(length, telemetry=True, model=model)
    on_config = off_config.replace(**dict.fromkeys(INSTRUMENTS_OFF))  # empty: the defaults
    longest = max(instrument_intervals(on_config, length).values())
    first, last = longest, 2 * longest
    return _step_times(settings, (on_config, off_config), first, last, "the instruments")


def private_step_cost(settings: Settings, model: str = "mlp") -> Measured:
    """Figure 22: seconds per step of DP-SGD (C = 1, σ = 1.1: Poisson batches of 64 on
    average, each example's gradient clipped by ghost clipping, noise added)
    and of the same run without it, telemetry every step in both; a miss is explained by
    the op time each step spends (tf.profiler), which says where DP-SGD's time goes."""
    first, last = _window(settings, epochs=2)
    plain = _config(last + 1, telemetry=True, model=model)
    private = plain.replace(dp_clip=1.0, dp_noise=1.1)
    return _step_times(settings, (private, plain), first, last, "DP-SGD", ops=True)


def private_step_cost_lenet(settings: Settings) -> Measured:
    """Figure 22 on LeNet."""
    return private_step_cost(settings, "lenet")


def checkpoint_cost(settings: Settings) -> Measured:
    """Figure 10: seconds per step with checkpoints on the default schedule, and off.

    The default saves about every 30 s of training, or less often when saving would take
    more than 2% of the time; a bench run is too short to see the clock rule, so it is
    set aside here and the cost rule alone spaces the checkpoints: the default's worst
    case, as often as its budget allows.
    """
    first, last = _window(settings)
    on_config = _config(last + 1, telemetry=True)  # checkpoint_every empty: the default
    off_config = on_config.replace(checkpoint_every=0)
    with _patched(checkpoints, "AUTO_SECONDS", 0.0):
        return _step_times(settings, (on_config, off_config), first, last, "checkpoints")


@contextlib.contextmanager
def _patched(module: Any, name: str, value: Any) -> Iterator[None]:
    """`module.name` set to `value` for the block."""
    saved = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, saved)


def _step_times(
    settings: Settings,
    configs: tuple[RunConfig, RunConfig],
    first: int,
    last: int,
    what: str,
    *,
    ops: bool = False,
) -> Measured:
    """Seconds per step from step `first` to `last` of runs with config A and with B,
    interleaved; a miss is explained by sampling one more run of each and, with `ops`,
    by the op time of each one's trainer step (`what` must then be in that step)."""
    on_config, off_config = configs
    with _clocked_engine() as (engine, store):
        on = _engine_rate(engine, store, on_config, first, last)
        off = _engine_rate(engine, store, off_config, first, last)
        paired = settings.interleave(lambda: 1 / on(), lambda: 1 / off())

    def diagnose() -> str:
        sampled = (
            f"Sampled in one more run each, a step with {what} took "
            f"{_engine_profile(on_config, first, last)}; without, "
            f"{_engine_profile(off_config, first, last)}."
        )
        if not ops:
            return sampled
        on, off = _trainer_ops(on_config), _trainer_ops(off_config)
        return (
            f"{sampled} Profiled with tf.profiler, a step with {what} spends "
            f"{on.summary()}; without, {off.summary()}; the op time {what} add: "
            f"{on.excess_over(off)}."
        )

    return Measured.compared(paired, "s", diagnose=diagnose)


def two_runs_at_once(settings: Settings) -> Measured:
    """Figure 7: total steps/s of two runs trained together and one after the other.

    Each sample times the two runs from `start` to the end of both, setup and validation
    included: what a user waiting for both sees. The runs are the engine's defaults
    (`adamw`, telemetry every step, validation every epoch) with seeds 0 and 1, and the
    instruments off.
    """
    steps = settings.pick(300, 130)
    configs = queued_runs(steps, 2)
    # Steady: from the first epoch's end to the last epoch end before the final step.
    first = steps_per_epoch()
    last = (steps - 1) // first * first
    with tempfile.TemporaryDirectory() as folder:
        at_once = QueuedEngine(Path(folder) / "at_once.sqlite", max_concurrent=2)
        in_turn = QueuedEngine(Path(folder) / "in_turn.sqlite", max_concurrent=1)
        paired = interleave_engines(
            lambda: at_once.train(configs, first, last),
            lambda: in_turn.train(configs, first, last),
            (at_once.engine, in_turn.engine),
            settings,
        )
    return Measured.compared(
        paired,
        "steps/s",
        diagnose=lambda: (
            f"Both at once, a run took {at_once.describe()}; "
            f"one at a time, {in_turn.describe()} (of {available_cores()} cores)."
        ),
    )


def queued_runs(steps: int, runs: int) -> list[RunConfig]:
    """`runs` runs of `steps` steps, seeds 0 to `runs` - 1: the engine's defaults (`adamw`,
    telemetry every step, validation every epoch), the instruments off."""
    return [
        RunConfig(
            model=MODEL,
            dataset=DATASET,
            batch_size=BATCH,
            max_steps=steps,
            seed=seed,
            **INSTRUMENTS_OFF,
        )
        for seed in range(runs)
    ]


def interleave_engines(
    a: Sampler, b: Sampler, engines: Iterable[Engine], settings: Settings
) -> Paired:
    """Interleaved pairs of `a` and `b` (garbage collected between samples), then the
    `engines` they train in closed."""
    try:
        return settings.interleave(a, b)
    finally:
        for engine in engines:
            engine.close()


class QueuedEngine:
    """An engine that trains queued runs (figure 7's two, figure 14's eight), and what
    its samples saw."""

    def __init__(self, path: Path, max_concurrent: int) -> None:
        self.store = ClockedStore(path)
        self.engine = Engine(self.store, max_concurrent=max_concurrent)
        self.setup: list[float] = []  # running → first step logged, per run
        self.steady: list[float] = []  # steps/s after the first epoch, per run
        self.busy: list[float] = []  # cores this process kept busy, per sample

    def train(self, configs: list[RunConfig], first: int, last: int) -> float:
        """Trains the runs; returns their total steps per second, start to end."""
        start, cpu = time.perf_counter(), time.process_time()
        run_ids = [self.engine.start(config) for config in configs]
        steps = sum(_wait(self.engine, run_id).step for run_id in run_ids)
        elapsed = time.perf_counter() - start
        self.busy.append((time.process_time() - cpu) / elapsed)
        for run_id in run_ids:
            self.setup.append(self.store.times(run_id)[1] - self.store.started(run_id))
            self.steady.append(self.store.steady_rate(run_id, first, last))
        return steps / elapsed

    def describe(self) -> str:
        return (
            f"{statistics.median(self.setup):.2f} s from starting to its first step, then "
            f"trained at {statistics.median(self.steady):.0f} steps/s, with "
            f"{statistics.median(self.busy):.2f} cores busy"
        )


# Samplers -------------------------------------------------------------------------------


def _engine_rate(
    engine: Engine, store: ClockedStore, config: RunConfig, first: int, last: int
) -> Sampler:
    """A sampler that trains one run and returns its steps/s from step `first` to `last`."""

    def sample() -> float:
        run_id = engine.start(config)
        _wait(engine, run_id)
        return store.steady_rate(run_id, first, last)

    return sample


def _keras_rate(first: int, last: int) -> Sampler:
    """A sampler that fits one `last`-batch epoch with Keras and returns its steps/s from
    batch `first` to batch `last`. The model is compiled once and keeps training: its
    first sample traces, and later ones run warm."""
    model = _keras_model()
    clock = _BatchClock()

    def sample() -> float:
        batches = _keras_batches(last)
        clock.times.clear()
        # shuffle=False: the pipeline shuffles already (and Keras warns otherwise).
        model.fit(
            batches, epochs=1, steps_per_epoch=last, shuffle=False, verbose=0, callbacks=[clock]
        )
        return (last - first) / (clock.times[last - 1] - clock.times[first - 1])

    return sample


def _keras_model() -> keras.Model:
    """Figure 1's model, compiled for `model.fit` with Keras's AdamW."""
    dataset = data.load(DATASET)
    model = models.build(
        MODEL, input_shape=dataset.input_shape, num_classes=dataset.num_classes, seed=0
    )
    model.compile(
        optimizer=keras.optimizers.AdamW(learning_rate=LEARNING_RATE),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def _keras_batches(steps: int) -> Any:
    """The engine's training pipeline, as many epochs as `steps` batches need."""
    return data.pipeline(
        data.load(DATASET),
        "train",
        batch_size=BATCH,
        seed=0,
        drop_remainder=True,
        epochs=math.ceil(steps / steps_per_epoch()),
    )


class _BatchClock(keras.callbacks.Callback):
    """Records `time.perf_counter()` at the end of every training batch."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self.times.append(time.perf_counter())


# Where an engine step's time goes -------------------------------------------------------


def _engine_profile(config: RunConfig, first: int, last: int) -> str:
    """Where the steps of one more run of `config` go: the calls of the engine's run loop
    (`core.engine.execution`), sampled in the run's thread from step `first` to `last`.

    Returns e.g. "4.02 ms (Trainer.step 3.10 ms, Trainer.snapshot 0.61 ms, …)".
    """
    gc.collect()  # as before every sample: see the module docstring
    sampler = StackSampler(execution.__file__)

    def on_append(run_id: str, step: int) -> None:
        if step == first:
            sampler.start(threading.get_ident())
        elif step == last:
            sampler.stop()

    with _clocked_engine(on_append=on_append) as (engine, store):
        try:
            run_id = engine.start(config)
            _wait(engine, run_id)
        finally:
            sampler.stop()  # if the run ended early: restores the switch interval
        step_seconds = 1 / store.steady_rate(run_id, first, last)
    total = sum(sampler.seconds.values())
    parts = ", ".join(
        f"{call} {seconds / total * step_seconds * 1e3:.2f} ms"
        for call, seconds in sampler.seconds.most_common(PROFILE_TOP)
    )
    return f"{step_seconds * 1e3:.2f} ms ({parts})"


def _trainer_ops(config: RunConfig) -> profiling.OpProfile:
    """The op time of one warm step of a trainer of `config`, as most of its steps are:
    logged if it logs every step, with the per-layer statistics unless a budget spaces
    them (`per_layer_schedule`). The traced step the engine runs, without the engine."""
    import tensorflow as tf

    from core.training.trainer import Trainer

    gc.collect()
    trainer = Trainer(config, tf.distribute.get_strategy())
    steps = itertools.count(1)
    log = config.log_every == 1
    per_layer = log and config.telemetry and not per_layer_schedule(config).budgeted

    def step() -> None:
        trainer.step(next(steps), log=log, per_layer=per_layer)

    try:
        for _ in range(5):  # traced, then warm
            step()
        return profiling.tf_ops(step, PROFILED_STEPS)
    finally:
        trainer.close()


def _keras_ops() -> profiling.OpProfile:
    """The op time of one warm step of figure 1's `model.fit` (its train function)."""
    model = _keras_model()
    batches = _keras_batches(PROFILED_STEPS + 5)
    model.fit(batches, epochs=1, steps_per_epoch=5, shuffle=False, verbose=0)  # traced
    iterator = iter(batches)
    return profiling.tf_ops(lambda: model.train_function(iterator), PROFILED_STEPS)


# Runs -----------------------------------------------------------------------------------


@contextlib.contextmanager
def _clocked_engine(
    on_append: Callable[[str, int], None] | None = None,
) -> Iterator[tuple[Engine, ClockedStore]]:
    """An engine that trains one run at a time, on a `ClockedStore` in a temporary folder."""
    with tempfile.TemporaryDirectory() as folder:
        store = ClockedStore(Path(folder) / "bench.sqlite", on_append=on_append)
        engine = Engine(store, max_concurrent=1)
        try:
            yield engine, store
        finally:
            engine.close()


def _config(steps: int, *, telemetry: bool, log_every: int = 1, model: str = MODEL) -> RunConfig:
    """Figures 1 and 2's run: `steps` steps, validating only at the last one."""
    return RunConfig(
        model=model,
        dataset=DATASET,
        optimizer="adamw",
        hyperparameters={"learning_rate": LEARNING_RATE},
        batch_size=BATCH,
        log_every=log_every,
        telemetry=telemetry,
        max_steps=steps,
        epochs=math.ceil(steps / steps_per_epoch()),
        val_every=steps,
        **INSTRUMENTS_OFF,
    )


def _window(settings: Settings, epochs: int = 4) -> tuple[int, int]:
    """(first, last): the steps whose ends bound the timed window, `epochs` whole epochs
    (one, quick) after the first one."""
    epoch = steps_per_epoch()
    return epoch, epoch * (1 + settings.pick(epochs, 1))


def steps_per_epoch() -> int:
    """Batches in an epoch of the figures' dataset."""
    return len(data.load(DATASET).y_train) // BATCH


def _wait(engine: Engine, run_id: str) -> RunStatus:
    """Waits for the run to complete and returns its status; raises if it fails or takes
    over `RUN_TIMEOUT`."""
    status = engine.wait(run_id, RUN_TIMEOUT)
    if status.active:
        engine.stop(run_id)
        engine.wait(run_id)
        raise TimeoutError(f"run {run_id} took over {RUN_TIMEOUT:.0f} s")
    if status.status != "completed":
        raise RuntimeError(f"run {run_id} ended {status.status}: {status.error}")
    return status
