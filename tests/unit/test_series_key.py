"""A logged series' name (`core.series.SeriesKey`): every key the lab writes reads back as
it was, a nested layer's path included, and a string that is no key is refused by name."""

from __future__ import annotations

import keras
import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

from core.export import column_order
from core.series import SeriesKey, logged_of, parsed
from core.training.instruments import INSTRUMENTS
from core.training.live import TASK_WEIGHT_KNOBS, task_weight, weighted_task
from core.training.losses import MultiTask
from core.training.telemetry import LayerStatistics

#: What `list_series` gave for a store of two real runs, before keys had a type
#: (`optlab train --dataset digits --model cnn --optimizer clipped_adam` with every
#: instrument, and `--model mlp --optimizer projected_gd --multitask`): what existing stores
#: and exports hold. A multi-task model's heads are layers named after their tasks.
STORED = (
    "loss",
    "accuracy",
    "loss/digit",
    "loss/parity",
    "accuracy/parity",
    "grad_norm/digit",
    "grad_norm/parity",
    "learning_rate",
    "radius",
    "distance_from_init",
    "grad_norm",
    "grad_norm_clipped",
    "clip_active",
    "top_k_kept",
    "pruned_frozen",
    "param_norm",
    "param_norm_proposed",
    "projection_active",
    "step_norm/dense1",
    "step_norm/dense2",
    "step_norm/digit",
    "step_norm/parity",
    "param_norm/dense1",
    "param_norm/dense2",
    "param_norm/digit",
    "param_norm/parity",
    "update_ratio/dense1",
    "update_ratio/dense2",
    "update_ratio/digit",
    "update_ratio/parity",
    "sparsity/dense1",
    "sparsity/dense2",
    "sparsity/digit",
    "sparsity/parity",
    "distance_from_init/dense1",
    "distance_from_init/dense2",
    "distance_from_init/digit",
    "distance_from_init/parity",
    "epoch",
    "wall_time",
    "alpha",
    "noise_scale",
    "noise_scale/grad_sq",
    "noise_scale/trace",
    "sharpness",
    "sharpness/loss",
    "val_loss",
    "val_accuracy",
    "val_accuracy/parity",
    "clip_norm",
    "step_norm/conv1",
    "step_norm/conv2",
    "step_norm/logits",
    "param_norm/conv1",
    "param_norm/conv2",
    "param_norm/logits",
    "update_ratio/conv1",
    "update_ratio/conv2",
    "update_ratio/logits",
    "sparsity/conv1",
    "sparsity/conv2",
    "sparsity/logits",
    "distance_from_init/conv1",
    "distance_from_init/conv2",
    "distance_from_init/logits",
)

#: The keys the lab declares, beside those it computes per layer.
DECLARED = (
    *MultiTask.means,
    *MultiTask.last_values,
    *(metric for instrument in INSTRUMENTS.values() for metric in instrument.metrics),
    *(knob.name for knob in TASK_WEIGHT_KNOBS),
)


@pytest.mark.parametrize("stored", [*STORED, *DECLARED])
def test_every_key_the_lab_writes_reads_back_as_it_was(stored: str) -> None:
    key = SeriesKey.parse(stored)
    assert key.format() == stored
    assert key.statistic == stored.split("/")[0]  # the lab's statistics are single words
    assert (key.of is None) == ("/" not in stored)


def test_a_layer_of_a_nested_model_keeps_its_whole_path() -> None:
    inner = keras.Sequential([keras.layers.Dense(3, name="dense")], name="inner")
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(2, name="out")(inner(inputs)))
    statistics = LayerStatistics(model, optimizer=None)
    assert statistics.layers == ["inner/dense", "out"]  # Keras's paths, without the variable
    row = statistics.row({"update_ratio": tf.constant([0.5, 0.25])})
    assert row == {"update_ratio/inner/dense": 0.5, "update_ratio/out": 0.25}  # as stored
    assert [SeriesKey.parse(key) for key in row] == [
        SeriesKey("update_ratio", "inner/dense"),
        SeriesKey("update_ratio", "out"),
    ]
    assert logged_of(row, "update_ratio") == ["inner/dense", "out"]


def test_a_task_weight_is_a_knob_of_its_task() -> None:
    assert task_weight("parity") == "task_weight/parity"
    assert weighted_task("task_weight/parity") == "parity"
    assert weighted_task("learning_rate") is None


@pytest.mark.parametrize("text", ["", "/", "/dense1", "update_ratio/"])
def test_a_string_that_is_no_key_is_refused_by_name(text: str) -> None:
    with pytest.raises(ValueError, match=f"series key {text!r}"):
        SeriesKey.parse(text)


def test_a_key_that_no_string_would_read_back_as_is_refused() -> None:
    with pytest.raises(ValueError, match="'update/ratio'"):
        SeriesKey("update/ratio", "dense1")
    with pytest.raises(ValueError, match="'update_ratio'"):
        SeriesKey("update_ratio", "")


def test_keys_that_do_not_parse_are_skipped_where_a_run_is_read_whole() -> None:
    # A script's `fit` may log any name; its charts and exports place what they can.
    keys = ["loss", "sparsity/b", "odd/", "/odd", "sparsity/a", "loss/digit"]
    assert list(parsed(keys)) == ["loss", "sparsity/b", "sparsity/a", "loss/digit"]
    assert logged_of(keys, "sparsity") == ["b", "a"]
    assert logged_of(keys, "loss") == ["digit"]
    assert column_order(keys) == ["loss", "/odd", "odd/", "sparsity/b", "sparsity/a", "loss/digit"]


@given(
    statistic=st.text(min_size=1).filter(lambda text: "/" not in text),
    of=st.none() | st.text(st.characters() | st.just("/"), min_size=1),  # paths: often a /
)
def test_any_key_reads_back_from_its_string(statistic: str, of: str | None) -> None:
    key = SeriesKey(statistic, of)
    assert SeriesKey.parse(key.format()) == key
