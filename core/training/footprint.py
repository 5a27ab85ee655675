"""What a run's model and optimizer take in memory, known before either is allocated;
and the refusal of a run that cannot fit (`check_fits`).

The model is built inside `keras.StatelessScope`, where Keras 3 creates each variable
without its value (its initializer runs when the value is first read), so its weights'
shapes and dtypes are known, a built-in model's and a plugin's alike, for nothing. The
optimizer's state cannot be built so (Keras's TensorFlow optimizer reads each variable
as it builds), so it is measured on two small probes instead: what the optimizer keeps
for a variable of 2n entries less what it keeps for one of n is its state per parameter,
every slot of its algorithm and of each knob that is on included (momentum's velocity,
Adam's two moments, a flat-vector plugin's state, top-k's error feedback).

The estimate counts what a run keeps for each parameter while it trains: the weight, one
gradient, the optimizer's state, the initial weights the telemetry measures the distance
from, and the sharpness instrument's vector when it is on. It is a lower bound: the
activations, the data and transient copies come on top.
"""

from __future__ import annotations

import functools
import json
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import psutil

from core import data
from core.knobs import InvalidInput
from core.training import tf_import
from core.training.config import RunConfig

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    import keras

T = TypeVar("T")

FLOAT32 = 4  # bytes: a gradient's and a copy of the weights' entries
PROBE = 1024  # entries of the smaller probe variable


@dataclass(frozen=True)
class Footprint:
    """What a run keeps in memory for its parameters.

    Attributes:
        parameters: The model's weights, trainable or not.
        bytes: Weights, a gradient, the optimizer's state and the instruments' copies.
    """

    parameters: int
    bytes: int


def footprint(config: RunConfig) -> Footprint | None:
    """What a run of `config` keeps for its parameters; None when its model or optimizer
    cannot be built here (a plugin's that fails: its run then says why)."""
    # Keras is imported through `tf_import`, one thread at a time: an engine measures a run
    # handed to it while its warm-up imports TensorFlow, and two threads importing it at
    # once deadlocked (the warm-up died, and the run stayed queued).
    tf_import.load()
    dataset = data.dataset_catalog.info(config.dataset, data_dir=config.data_dir)
    hyperparameters = json.dumps(config.to_dict()["hyperparameters"], sort_keys=True)
    try:
        parameters, weight_bytes, trainable = _model_weights(
            config.model, tuple(dataset.input_shape), dataset.num_classes, config.multitask
        )
        state = _state_bytes_per_parameter(config.optimizer, hyperparameters, config.telemetry)
    except Exception:  # whatever a plugin raises: its run reports it, as before
        return None
    sharpness = config.telemetry and config.sharpness_every != 0
    copies = 2 + sharpness  # a gradient, the initial weights, the sharpness's vector
    return Footprint(parameters, weight_bytes + math.ceil(trainable * (copies * FLOAT32 + state)))


def check_fits(config: RunConfig) -> None:
    """Raises `InvalidInput` naming `model` when what a run of `config` keeps for its
    parameters (see `footprint`) is more than the memory available now."""
    need = footprint(config)
    available = psutil.virtual_memory().available
    if need is None or need.bytes <= available:
        return
    shape = data.dataset_catalog.info(config.dataset, data_dir=config.data_dir).input_shape
    raise InvalidInput(
        {
            "model": f"{config.model} on examples of shape {shape} has {need.parameters:,} "
            f"parameters: with the {config.optimizer} optimizer's state it needs at least "
            f"{need.bytes / 2**30:,.1f} GB, and {available / 2**30:,.1f} GB of memory is "
            "available; take a smaller model, or fewer features"
        }
    )


@functools.lru_cache(maxsize=64)
def _model_weights(
    model: str, input_shape: tuple[int, ...], num_classes: int, multitask: bool
) -> tuple[int, int, int]:
    """(parameters, their bytes, trainable parameters) of the model, built without values."""

    def build() -> tuple[int, int, int]:
        import keras

        from core import models

        # Not initialized on leaving the scope either: the values are never made.
        with keras.StatelessScope(initialize_variables=False):
            built = models.build(
                model, input_shape=input_shape, num_classes=num_classes, seed=0, multitask=multitask
            )
        return _entries(built.weights), _bytes(built.weights), _entries(built.trainable_weights)

    return _in_new_thread(build)


@functools.lru_cache(maxsize=64)
def _state_bytes_per_parameter(optimizer: str, hyperparameters: str, telemetry: bool) -> float:
    """The bytes of state the optimizer keeps per trainable parameter, measured on probes
    of `PROBE` and twice as many entries (`hyperparameters` as JSON)."""

    def measure() -> float:
        import keras

        from core import optimizers

        def kept(size: int) -> int:
            built = optimizers.build(optimizer, **json.loads(hyperparameters), telemetry=telemetry)
            built.build([keras.Variable(np.zeros(size, np.float32), name="probe")])
            return _bytes(built.variables)

        return (kept(2 * PROBE) - kept(PROBE)) / PROBE

    return _in_new_thread(measure)


def _in_new_thread(work: Callable[[], T]) -> T:
    """`work()` in a thread of its own: Keras keeps its names and scopes per thread, so
    the caller's (a run's, a test's) stay as they were."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="optlab-footprint") as pool:
        return pool.submit(work).result()


def _entries(variables: Iterable[keras.Variable]) -> int:
    return sum(math.prod(v.shape) for v in variables)


def _bytes(variables: Iterable[Any]) -> int:
    return sum(math.prod(v.shape) * np.dtype(v.dtype).itemsize for v in variables)
