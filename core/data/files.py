"""Datasets from the user's own files: `npz:PATH` and `csv:PATH`.

A `.npz` holds four arrays, `x_train`, `y_train`, `x_test` and `y_test`: the features
(images `(N, height, width[, channels])`, or rows `(N, features)`) and integer class labels
`0 .. K − 1`. A `.csv` holds one example per row, its features then its label in the last
column, with or without a header line; its last fifth of each class is the test split
(`stratified_split`: the same split every time, no seed). Features become float32 as they
are, except bytes (`uint8`), which are scaled into [0, 1] as images are.

Every check happens when the file is read, with one message naming `dataset`: the size
limit, the arrays and their shapes, the labels, non-finite values. A file is read once per
process while it does not change (its size and modification time are its identity).
"""

from __future__ import annotations

import functools
import io
import os
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from core.data.dataset import Dataset, frozen, stratified_split
from core.data.registry import DatasetInfo

#: The largest file the lab reads: each process that trains on it holds it in memory.
MAX_BYTES = 200 * 2**20
#: The name prefixes of file datasets, by format.
FORMATS = ("npz", "csv")
ARRAYS = ("x_train", "y_train", "x_test", "y_test")
TEST_FRACTION = 0.2  # of each class of a CSV
MAX_CLASSES = 1000


class BadDataFile(ValueError):
    """A file that is not a dataset the lab can train on; the message names `dataset`."""


def is_file(name: object) -> bool:
    """Whether `name` names a file dataset (`npz:PATH` or `csv:PATH`)."""
    return isinstance(name, str) and name.partition(":")[0] in FORMATS and ":" in name


def info(name: str) -> DatasetInfo:
    """What the file dataset `name` is (reading the file, once while it is unchanged)."""
    dataset = load(name)
    return DatasetInfo(
        name,
        f"Your file {Path(name.partition(':')[2]).name}: {len(dataset.x_train):,} train / "
        f"{len(dataset.x_test):,} test examples, {dataset.num_classes} classes.",
        dataset.input_shape,
        dataset.num_classes,
        len(dataset.x_train),
        offline=True,
    )


def load(name: str) -> Dataset:
    """The dataset in the file `name` names. Raises `BadDataFile` saying what is wrong."""
    kind, _, path_text = name.partition(":")
    path = Path(path_text).expanduser()
    try:
        stat = path.stat()
    except OSError as exc:
        raise BadDataFile(f"dataset: cannot read {path}: {exc.strerror}") from None
    if not path.is_file():
        raise BadDataFile(f"dataset: {path} is not a file")
    if stat.st_size > MAX_BYTES:
        raise BadDataFile(
            f"dataset: {path.name} is {stat.st_size / 2**20:,.0f} MB; the limit is "
            f"{MAX_BYTES / 2**20:,.0f} MB"
        )
    return _read(name, kind, os.fspath(path.resolve()), stat.st_size, stat.st_mtime_ns)


def check_bytes(kind: str, content: bytes) -> Dataset:
    """The dataset in `content`, a file of format `kind` (an upload, before it is kept).
    Raises `BadDataFile`."""
    if kind not in FORMATS:
        raise BadDataFile(f"dataset: must be a .npz or a .csv file (got .{kind})")
    if len(content) > MAX_BYTES:
        raise BadDataFile(
            f"dataset: the file is {len(content) / 2**20:,.0f} MB; the limit is "
            f"{MAX_BYTES / 2**20:,.0f} MB"
        )
    parse = _from_npz if kind == "npz" else _from_csv
    return parse("upload", io.BytesIO(content))


def keep(folder: Path, filename: str, content: bytes) -> str:
    """Checks an uploaded file and keeps it in `folder` under its name (made safe; a file
    of that name is replaced); returns its dataset name. Raises `BadDataFile`."""
    kind = Path(filename).suffix.removeprefix(".").lower()
    check_bytes(kind, content)
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", Path(filename).stem).strip("_")[:60] or "data"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}.{kind}"
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(content)
    os.replace(partial, path)  # whole, or not there: a run reading it never sees half
    return f"{kind}:{path.resolve()}"


def kept(folder: Path) -> list[str]:
    """The dataset names of the files kept in `folder`, by file name."""
    if not folder.is_dir():
        return []
    paths = sorted(p for p in folder.iterdir() if p.suffix.removeprefix(".") in FORMATS)
    return [f"{p.suffix.removeprefix('.')}:{p.resolve()}" for p in paths]


def label(name: str) -> str:
    """A dataset name as a picker shows it: a file's by its file name."""
    return f"your file {Path(name.partition(':')[2]).name}" if is_file(name) else name


@functools.lru_cache(maxsize=8)
def _read(name: str, kind: str, path: str, size: int, mtime_ns: int) -> Dataset:
    del size, mtime_ns  # the cache key: a changed file is read again
    with open(path, "rb") as file:
        return (_from_npz if kind == "npz" else _from_csv)(name, file)


def _from_npz(name: str, file: io.BufferedIOBase) -> Dataset:
    try:
        with np.load(file, allow_pickle=False) as archive:
            missing = [key for key in ARRAYS if key not in archive.files]
            if missing:
                raise BadDataFile(
                    f"dataset: the .npz lacks {', '.join(missing)} (it needs {', '.join(ARRAYS)})"
                )
            arrays = {key: archive[key] for key in ARRAYS}
    except BadDataFile:
        raise
    except (ValueError, OSError, EOFError) as exc:
        raise BadDataFile(f"dataset: not a readable .npz file ({exc})") from None
    return from_arrays(name, arrays)


def _from_csv(name: str, file: io.BufferedIOBase) -> Dataset:
    try:
        text = file.read().decode("utf-8")
    except UnicodeDecodeError:
        raise BadDataFile("dataset: a .csv must be UTF-8 text") from None
    lines = [line for line in text.splitlines() if line.strip()]
    if lines and not _numeric(lines[0]):
        lines = lines[1:]  # a header line
    try:
        table = np.loadtxt(lines, delimiter=",", dtype=np.float64, ndmin=2)
    except ValueError as exc:
        raise BadDataFile(f"dataset: every value of the .csv must be a number ({exc})") from None
    if table.shape[0] < 2 or table.shape[1] < 2:
        raise BadDataFile("dataset: a .csv needs rows of features then a label, two rows or more")
    x, y = table[:, :-1], table[:, -1]
    labels = _labels("y", y)
    train, test = stratified_split(labels, test_fraction=TEST_FRACTION)
    return from_arrays(
        name, {"x_train": x[train], "y_train": y[train], "x_test": x[test], "y_test": y[test]}
    )


def from_arrays(
    name: str, arrays: Mapping[str, np.ndarray], *, problem: str = "classification"
) -> Dataset:
    """The dataset of the four arrays (`ARRAYS`), checked as a file's are: raises
    `BadDataFile` saying what is wrong. A regression's targets are any finite numbers."""
    x_train, x_test = (_features(key, arrays[key]) for key in ("x_train", "x_test"))
    read = _labels if problem == "classification" else _targets
    y_train, y_test = (read(key, arrays[key]) for key in ("y_train", "y_test"))
    pairs = (("x_train", x_train, "y_train", y_train), ("x_test", x_test, "y_test", y_test))
    for x_key, x, y_key, y in pairs:
        if len(x) != len(y) or len(x) == 0:
            raise BadDataFile(
                f"dataset: {x_key} has {len(x):,} examples and {y_key} {len(y):,} labels; "
                "they must be as many, and not none"
            )
    if x_train.shape[1:] != x_test.shape[1:]:
        raise BadDataFile(
            f"dataset: x_train's examples are {x_train.shape[1:]} and x_test's "
            f"{x_test.shape[1:]}; they must be alike"
        )
    num_classes = 1  # a regression's one target
    if problem == "classification":
        num_classes = int(max(y_train.max(), y_test.max())) + 1
        if num_classes < 2 or num_classes > MAX_CLASSES:
            raise BadDataFile(f"dataset: needs 2 to {MAX_CLASSES} classes (got {num_classes})")
        if not np.isin(np.unique(y_test), y_train).all():
            raise BadDataFile("dataset: y_test has labels that y_train never shows")
    return Dataset(
        name=name,
        x_train=frozen(x_train),
        y_train=frozen(y_train),
        x_test=frozen(x_test),
        y_test=frozen(y_test),
        num_classes=num_classes,
        input_shape=x_train.shape[1:],
        problem=problem,
    )


def _features(key: str, x: np.ndarray) -> np.ndarray:
    if x.dtype.kind not in "iuf" or x.ndim < 2 or x.ndim > 4:
        raise BadDataFile(
            f"dataset: {key} must be numbers shaped (N, features), (N, height, width) or "
            f"(N, height, width, channels) (got {x.dtype} {x.shape})"
        )
    if x.dtype == np.uint8:
        x = x.astype(np.float32) / np.float32(255)  # bytes: pixels, scaled as images are
    x = np.asarray(x, np.float32)
    if not np.isfinite(x).all():
        raise BadDataFile(f"dataset: {key} holds NaN or infinite values")
    return x[..., np.newaxis] if x.ndim == 3 else x  # (N, H, W): one channel


def _labels(key: str, y: np.ndarray) -> np.ndarray:
    if y.dtype.kind not in "iuf" or y.ndim != 1:
        raise BadDataFile(f"dataset: {key} must be one integer label per example (got {y.shape})")
    if not np.isfinite(y).all() or (y != np.round(y)).any() or (y < 0).any():
        raise BadDataFile(f"dataset: {key} must hold class labels 0, 1, 2, ... (whole numbers ≥ 0)")
    return y.astype(np.int64)


def _targets(key: str, y: np.ndarray) -> np.ndarray:
    if y.dtype.kind not in "iuf" or y.ndim != 1:
        raise BadDataFile(f"dataset: {key} must be one number per example (got {y.shape})")
    if not np.isfinite(y).all():
        raise BadDataFile(f"dataset: {key} holds NaN or infinite values")
    return y.astype(np.float32)


def _numeric(line: str) -> bool:
    try:
        [float(value) for value in line.split(",")]
    except ValueError:
        return False
    return True
