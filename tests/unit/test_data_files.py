"""Datasets from the user's files (`npz:PATH`, `csv:PATH`): what they hold once read, and
every way a file is refused, naming `dataset` and never quoting what the file holds; a
`.npz` judged from its headers before any array is read; uploads kept by their content."""

from __future__ import annotations

import io
import os
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest

from core import data
from core.data import files, npz_archive
from core.data.held import MAX_HELD_BYTES, Held
from core.engine import RunConfig
from core.knobs import InvalidInput
from tests.hostile_files import Zeros, write_npz

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
    info = data.dataset_catalog.info(name)
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
    ({**arrays(), "y_train": np.zeros(80), "y_test": np.zeros(20)}, "every label is 0"),
    ({**arrays(), "y_train": np.full(80, 123_456)}, "needs 2 to 1000 classes; a label is 1000"),
    ({**arrays(), "y_test": np.full(20, 7)}, "y_test has labels that y_train never shows"),
    ({**arrays(), "x_train": np.array([[object()]] * 80)}, "holds Python objects"),
]


@pytest.mark.parametrize(("values", "reason"), BAD_NPZ)
def test_a_bad_npz_is_refused_saying_why(tmp_path: Path, values: dict, reason: str) -> None:
    with pytest.raises(InvalidInput) as error:
        RunConfig(dataset=npz(tmp_path, **values), model="mlp")
    assert set(error.value.errors) == {"dataset"} and reason in error.value.errors["dataset"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("1,2,0\n3,x,1\n", "not a table of numbers: row 2, column 2 is not a number"),
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


def test_uploads_are_kept_by_their_content_and_never_replaced(tmp_path: Path) -> None:
    """Two uploads of one name with other content are two datasets: the file the first
    run trained on stays as it was. The same content again is the same dataset."""
    first, second = (io.BytesIO() for _ in range(2))
    np.savez(first, **arrays(n_train=40))
    np.savez(second, **arrays(n_train=50))
    folder = tmp_path / "uploads"
    kept_first = files.keep(folder, "my data!.npz", first.getvalue())
    kept_second = files.keep(folder, "my data!.npz", second.getvalue())
    assert kept_first != kept_second and files.kept(folder) == sorted([kept_first, kept_second])
    assert Path(kept_first.removeprefix("npz:")).read_bytes() == first.getvalue()
    assert len(data.load(kept_first).x_train) == 40 and len(data.load(kept_second).x_train) == 50
    assert files.keep(folder, "my data!.npz", first.getvalue()) == kept_first
    assert len(files.kept(folder)) == 2
    digest = Path(kept_first).name.split(".")[1]
    assert files.label(kept_first) == f"your file my_data.npz ({digest[:8]})"
    assert files.label(f"npz:{tmp_path / 'mine.npz'}") == "your file mine.npz"


def test_an_npz_is_judged_by_its_headers_before_any_array_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """72 MB of bytes deflate to kilobytes and take 288 MB as float32: over a limit of
    256 MB, the file is refused from its headers, for a path and an upload alike."""
    path = tmp_path / "wide.npz"
    zeros = {"x_train": Zeros((64, 2**20), "uint8"), "x_test": Zeros((8, 2**20), "uint8")}
    write_npz(path, {**zeros, "y_train": np.arange(64) % 2, "y_test": np.arange(8) % 2})
    assert path.stat().st_size < 2**20
    monkeypatch.setattr(files, "MAX_LOADED_BYTES", 2**28)
    monkeypatch.setattr(npz_archive, "read", lambda *_: pytest.fail("an array was read"))
    reason = "its arrays take 0.3 GB once loaded (features as float32); the limit is 0.2 GB"
    with pytest.raises(InvalidInput) as error:
        RunConfig(dataset=f"npz:{path}", model="mlp")
    assert error.value.errors == {"dataset": reason}
    with pytest.raises(files.BadDataFile, match=re.escape(reason)):
        files.check_bytes("npz", path.read_bytes())


def npz_of_members(path: Path, members: dict[str, bytes], method: int) -> str:
    with zipfile.ZipFile(path, "w", compression=method) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return f"npz:{path}"


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array)
    return buffer.getvalue()


def refusal(name: str) -> str:
    with pytest.raises(InvalidInput) as error:
        RunConfig(dataset=name, model="mlp")
    assert set(error.value.errors) == {"dataset"}
    return error.value.errors["dataset"]


def test_an_npz_member_neither_stored_nor_deflated_is_refused(tmp_path: Path) -> None:
    members = {f"{key}.npy": npy(value) for key, value in arrays().items()}
    name = npz_of_members(tmp_path / "lzma.npz", members, zipfile.ZIP_LZMA)
    assert refusal(name) == (
        "not a .npz the lab reads: member 1 of the archive is compressed with method 14; "
        "only stored and deflated members are read"
    )


def test_an_npz_member_whose_size_disagrees_with_its_header_is_refused(tmp_path: Path) -> None:
    members = {f"{key}.npy": npy(value) for key, value in arrays().items()}
    members["x_train.npy"] = members["x_train.npy"][:-1590]  # 80 × 5 float32: 10 bytes left
    name = npz_of_members(tmp_path / "short.npz", members, zipfile.ZIP_DEFLATED)
    assert refusal(name) == (
        "not a .npz the lab reads: x_train.npy declares 138 bytes; its header, shape "
        "(80, 5) of float32, makes 1,728"
    )


@pytest.mark.parametrize("features", [5, 500])  # read whole with the header; or after it
def test_an_npz_whose_data_fails_its_checksum_is_refused(tmp_path: Path, features: int) -> None:
    given = arrays(shape=(features,))
    path = Path(npz(tmp_path, **given).removeprefix("npz:"))
    content = bytearray(path.read_bytes())
    at = content.index(npy(given["x_train"])) + 1000  # in x_train's data, stored
    content[at] ^= 0xFF
    path.write_bytes(content)
    assert refusal(f"npz:{path}") == (
        "not a .npz the lab reads: x_train.npy is damaged (its entry, its data or their checksum)"
    )


SECRET = "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin"
NUMBERS = "1,2,0\n3,4,1\n"


def header_quoting(text: str) -> bytes:
    """A .npy magic string and a header that is not a dictionary but `text`."""
    header = repr(text).encode("latin1")
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header


@pytest.mark.parametrize(
    ("kind", "content", "reason"),
    [
        ("csv", f"root:x:0:0:root:/root:/bin/bash\n{SECRET}\n", "row 2, column 1 is not a number"),
        ("csv", f"{NUMBERS}5,{SECRET},0\n", "row 3, column 2 is not a number"),
        ("csv", f"{NUMBERS}5,6\n{SECRET}\n", "row 3 has 2 values where the rows before it have 3"),
        ("csv", f"{NUMBERS}5,".encode() + b"\xff" + SECRET.encode(), "row 3 is not UTF-8 text"),
        ("npz", {"x_train.npy": header_quoting(SECRET)}, "x_train.npy is not a .npy array numpy"),
        ("npz", {"x_train.npy": SECRET.encode()}, "x_train.npy is not a .npy array numpy can read"),
        ("npz", SECRET, "not a zip archive"),
    ],
)
def test_no_error_about_a_file_quotes_what_it_holds(
    tmp_path: Path, kind: str, content: str | bytes | dict[str, bytes], reason: str
) -> None:
    """NumPy's and zipfile's own messages quote the file (`could not convert string
    'daemon:x:1:1:daemon'`): the lab's name a row and a column, or an array, instead."""
    path = tmp_path / f"secret.{kind}"
    if isinstance(content, dict):
        npz_of_members(path, content, zipfile.ZIP_STORED)
    else:
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    message = refusal(f"{kind}:{path}")
    assert reason in message
    for word in ("root", "daemon", "sbin", "nologin"):
        assert word not in message.replace(str(path), "")


def test_a_file_is_read_once_however_its_path_is_spelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    name = npz(folder, **arrays())
    spellings = [name, f"npz:{folder}/../data/mine.npz", f"npz:{folder}/./mine.npz"]
    kept = Held(MAX_HELD_BYTES)
    monkeypatch.setattr(files, "KEPT", kept)
    loaded = [data.load(spelling) for spelling in spellings * 3]
    assert all(dataset is loaded[0] for dataset in loaded)
    assert len(kept.by_use()) == 1


def test_the_files_kept_take_at_most_their_bound_the_one_used_last_staying(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However many files a shared store's users name, a process keeps at most
    `MAX_HELD_BYTES` of their arrays (here a bound of two files), the latest used."""
    for i in range(3):
        np.savez(tmp_path / f"file{i}.npz", **arrays())
    names = [f"npz:{tmp_path / f'file{i}.npz'}" for i in range(3)]
    kept = Held(2 * files.load(names[0]).nbytes)
    monkeypatch.setattr(files, "KEPT", kept)
    loaded = [files.load(name) for name in names]
    assert len(kept.by_use()) == 2
    assert files.load(names[2]) is loaded[2] and files.load(names[1]) is loaded[1]
    assert files.load(names[0]) is not loaded[0]  # let go of, so read again
    kept.max_bytes = 0
    kept.put("latest", loaded[1])
    assert kept.by_use() == ["latest"]  # the one kept last stays, whatever its size
