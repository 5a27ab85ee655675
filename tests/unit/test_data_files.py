"""Datasets from the user's files (`npz:PATH`, `csv:PATH`): what they hold once read, and
every way a file is refused, naming `dataset`."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from core import data
from core.data import files
from core.engine import RunConfig
from core.knobs import InvalidInput

RNG = np.random.default_rng(0)


def arrays(n_train: int = 80, n_test: int = 20, shape: tuple[int, ...] = (5,)) -> dict:
    x = RNG.normal(size=(n_train + n_test, *shape)).astype("float32")
    y = np.arange(n_train + n_test) % 3
    train, test = slice(None, n_train), slice(n_train, None)
    return {"x_train": x[train], "y_train": y[train], "x_test": x[test], "y_test": y[test]}


def npz(tmp_path: Path, **values: np.ndarray) -> str:
    path = tmp_path / "mine.npz"
    np.savez(path, **values)
    return f"npz:{path}"


def csv(tmp_path: Path, text: str) -> str:
    path = tmp_path / "mine.csv"
    path.write_text(text)
    return f"csv:{path}"


def test_an_npz_of_rows_loads_as_they_are(tmp_path: Path) -> None:
    given = arrays()
    dataset = data.load(npz(tmp_path, **given))
    assert dataset.input_shape == (5,) and dataset.num_classes == 3
    np.testing.assert_array_equal(dataset.x_train, given["x_train"])
    np.testing.assert_array_equal(dataset.y_test, given["y_test"])
    assert not dataset.x_train.flags.writeable  # shared between runs


def test_an_npz_of_byte_images_gets_a_channel_and_the_unit_range(tmp_path: Path) -> None:
    images = RNG.integers(0, 256, size=(30, 6, 7), dtype=np.uint8)
    labels = np.arange(30) % 2
    x = {"x_train": images[:20], "x_test": images[20:]}
    name = npz(tmp_path, **x, y_train=labels[:20], y_test=labels[20:])
    info = data.registry.info(name)
    assert info.input_shape == (6, 7, 1) and info.train_size == 20 and info.num_classes == 2
    dataset = data.load(name)
    np.testing.assert_allclose(dataset.x_train[..., 0], images[:20] / 255, rtol=1e-6)


@pytest.mark.parametrize("header", ["f1,f2,label\n", ""])
def test_a_csv_splits_a_fifth_of_each_class_for_testing(tmp_path: Path, header: str) -> None:
    rows = [f"{i},{i * 0.5},{i % 2}" for i in range(20)]
    dataset = data.load(csv(tmp_path, header + "\n".join(rows) + "\n"))
    assert dataset.input_shape == (2,) and dataset.num_classes == 2
    assert len(dataset.x_train) == 16 and np.bincount(dataset.y_test).tolist() == [2, 2]
    # The last rows of each class are the test split: the same every time.
    assert dataset.x_test[:, 0].tolist() == [16.0, 17.0, 18.0, 19.0]


def test_a_changed_file_is_read_again(tmp_path: Path) -> None:
    name = npz(tmp_path, **arrays(n_train=40))
    assert len(data.load(name).x_train) == 40
    np.savez(name.removeprefix("npz:"), **arrays(n_train=50))
    os.utime(name.removeprefix("npz:"), ns=(0, 10**18))  # a new modification time, surely
    assert len(data.load(name).x_train) == 50


BAD_NPZ = [
    ({"x_train": np.zeros((4, 2))}, "lacks y_train, x_test, y_test"),
    ({**arrays(), "y_train": np.zeros(3)}, "x_train has 80 examples and y_train 3 labels"),
    ({**arrays(), "x_test": np.zeros((20, 6), "float32")}, "x_train's examples are (5,)"),
    ({**arrays(), "y_train": np.full(80, 0.5)}, "y_train must hold class labels"),
    ({**arrays(), "y_test": -np.ones(20)}, "y_test must hold class labels"),
    ({**arrays(), "x_train": np.full((80, 5), np.nan)}, "x_train holds NaN or infinite values"),
    ({**arrays(), "x_train": np.array(["a"] * 80)}, "x_train must be numbers"),
    ({**arrays(), "y_train": np.zeros(80), "y_test": np.zeros(20)}, "needs 2 to 1000 classes"),
    ({**arrays(), "y_test": np.full(20, 7)}, "y_test has labels that y_train never shows"),
    ({**arrays(), "x_train": np.array([[object()]] * 80)}, "not a readable .npz file"),
]


@pytest.mark.parametrize(("values", "reason"), BAD_NPZ)
def test_a_bad_npz_is_refused_saying_why(tmp_path: Path, values: dict, reason: str) -> None:
    with pytest.raises(InvalidInput) as error:
        RunConfig(dataset=npz(tmp_path, **values), model="mlp")
    assert set(error.value.errors) == {"dataset"} and reason in error.value.errors["dataset"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("1,2,0\n3,x,1\n", "every value of the .csv must be a number"),
        ("1,0\n", "two rows or more"),
        ("1,2,0.5\n3,4,1\n", "must hold class labels"),
    ],
)
def test_a_bad_csv_is_refused_saying_why(tmp_path: Path, text: str, reason: str) -> None:
    with pytest.raises(InvalidInput, match=f"dataset: .*{reason}"):
        RunConfig(dataset=csv(tmp_path, text), model="mlp")


def test_a_missing_or_too_large_file_is_refused(tmp_path: Path, monkeypatch) -> None:
    with pytest.raises(InvalidInput, match=r"dataset: cannot read .*No such file"):
        RunConfig(dataset=f"npz:{tmp_path / 'none.npz'}")
    name = npz(tmp_path, **arrays())
    monkeypatch.setattr(files, "MAX_BYTES", 100)
    with pytest.raises(InvalidInput, match=r"dataset: mine.npz is \d+ MB; the limit is 0 MB"):
        RunConfig(dataset=name, model="mlp")
    with pytest.raises(files.BadDataFile, match="the limit"):
        files.check_bytes("npz", b"x" * 101)


def test_a_model_that_needs_images_is_refused_for_rows(tmp_path: Path) -> None:
    name = npz(tmp_path, **arrays())
    with pytest.raises(InvalidInput) as error:
        RunConfig(dataset=name, model="lenet")
    expected = f"lenet needs images; {name} has examples of shape (5,): take mlp"
    assert error.value.errors == {"model": expected}
    assert RunConfig(dataset=name, model="mlp", batch_size=16).dataset == name


def test_an_upload_is_checked_before_it_is_kept(tmp_path: Path) -> None:
    path = Path(npz(tmp_path, **arrays()).removeprefix("npz:"))
    assert files.check_bytes("npz", path.read_bytes()).num_classes == 3
    with pytest.raises(files.BadDataFile, match=r"must be a \.npz or a \.csv"):
        files.check_bytes("txt", b"1,2")
