"""Any prepared TFDS dataset by name, `tfds:NAME`: images or rows of features with a class
label, described from its JSON files, loaded, and refused with a reason otherwise."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from core import data
from core.data import tfds_source
from core.engine import RunConfig
from core.knobs import InvalidInput
from tests.tfds_builders import prepare

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import tensorflow_datasets as tfds

    root = tmp_path_factory.mktemp("tfds")
    rng = np.random.default_rng(0)

    def rows(count: int) -> list[dict]:
        x = rng.normal(size=(count, 5)).astype(np.float32)
        return [{"x": row, "y": int(row[0] > 0) + 2 * int(row[1] > 0)} for row in x]

    prepare(
        root,
        "TinyRows",
        {
            "x": tfds.features.Tensor(shape=(5,), dtype=np.float32),
            "y": tfds.features.ClassLabel(num_classes=4),
        },
        {"train": rows(40), "test": rows(12)},
        supervised_keys=("x", "y"),
    )

    def images(count: int) -> list[dict]:
        return [
            {"picture": np.full((6, 7, 3), 40 * (i % 3), np.uint8), "kind": i % 3}
            for i in range(count)
        ]

    prepare(
        root,
        "TinyPictures",
        {
            "picture": tfds.features.Image(shape=(6, 7, 3)),
            "kind": tfds.features.ClassLabel(num_classes=3),
        },
        {"train": images(9), "test": images(3)},
        supervised_keys=("picture", "kind"),
    )
    prepare(  # no class label: a regression the lab cannot take by name
        root,
        "TinyScores",
        {"x": tfds.features.Tensor(shape=(2,), dtype=np.float32), "score": np.float32},
        {
            "train": [{"x": np.zeros(2, np.float32), "score": 1.5}] * 4,
            "test": [{"x": np.zeros(2, np.float32), "score": 0.5}],
        },
        supervised_keys=("x", "score"),
    )
    return root


def test_a_prepared_dataset_is_described_from_its_files_without_tensorflow(prepared) -> None:
    code = (
        "import sys, json; from core.data import dataset_catalog; "
        f"i = dataset_catalog.info('tfds:tiny_rows', data_dir={str(prepared)!r}); "
        "print(json.dumps([list(i.input_shape), i.num_classes, i.train_size, "
        "'tensorflow' in sys.modules]))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[5], 4, 40, False]
    assert tfds_source.prepared_names(prepared) == [
        "tfds:tiny_pictures",
        "tfds:tiny_rows",
        "tfds:tiny_scores",
    ]


def test_rows_and_images_load_as_the_lab_trains_on_them(prepared) -> None:
    rows = data.load("tfds:tiny_rows", data_dir=str(prepared))
    assert rows.name == "tfds:tiny_rows" and rows.x_train.shape == (40, 5)
    assert rows.num_classes == 4 and rows.y_train.dtype == np.int64
    np.testing.assert_array_equal(
        rows.y_train, (rows.x_train[:, 0] > 0) + 2 * (rows.x_train[:, 1] > 0)
    )
    pictures = data.load("tfds:tiny_pictures", data_dir=str(prepared))
    assert pictures.x_train.shape == (9, 6, 7, 3) and pictures.num_classes == 3
    np.testing.assert_allclose(pictures.x_train[:, 0, 0, 0], 40 * pictures.y_train / 255)


def test_run_configs_check_a_tfds_dataset_against_the_model_and_the_batch(prepared) -> None:
    base = {"dataset": "tfds:tiny_rows", "data_dir": str(prepared), "batch_size": 8}
    assert RunConfig.from_dict({**base, "model": "mlp"}).dataset == "tfds:tiny_rows"
    with pytest.raises(InvalidInput) as refused:
        RunConfig.from_dict({**base, "model": "lenet", "batch_size": 64})
    assert "lenet needs images" in refused.value.errors["model"]
    assert "40 examples" in refused.value.errors["batch_size"]
    pictures = {**base, "dataset": "tfds:tiny_pictures", "model": "cnn"}
    assert RunConfig.from_dict(pictures).model == "cnn"


def test_what_cannot_be_trained_by_name_is_refused_at_once_saying_why(
    prepared, tmp_path, monkeypatch
) -> None:
    def no_probe(timeout: float = 2.0) -> bool:
        raise AssertionError("checking a tfds: name must not probe the network")

    monkeypatch.setattr(tfds_source, "network_reachable", no_probe)
    started = time.monotonic()
    with pytest.raises(InvalidInput) as missing:
        RunConfig.from_dict({"dataset": "tfds:imagenet2012", "data_dir": str(tmp_path)})
    assert time.monotonic() - started < 2
    message = missing.value.errors["dataset"]
    assert "tfds.load('imagenet2012')" in message and str(tmp_path) in message
    with pytest.raises(InvalidInput) as unlabelled:
        RunConfig.from_dict({"dataset": "tfds:tiny_scores", "data_dir": str(prepared)})
    assert "a class label" in unlabelled.value.errors["dataset"]
