"""Datasets from the user's own files: `npz:PATH` and `csv:PATH`.

A `.npz` holds four arrays, `x_train`, `y_train`, `x_test` and `y_test`: the features
(images `(N, height, width[, channels])`, or rows `(N, features)`) and integer class labels
`0 .. K − 1`. A `.csv` holds one example per row, its features then its label in the last
column, with or without a header line; its last fifth of each class is the test split
(`stratified_split`: the same split every time, no seed). Features become float32 as they
are, except bytes (`uint8`), which are scaled into [0, 1] as images are.

Every check happens when the file is read, with one message naming `dataset`: the size
limits, the arrays and their shapes, the labels, non-finite values. A message names a row
and a column, or an array, and never quotes what the file holds. A `.npz` is judged from
its members' headers before any array is read (see `core.data.npz_archive`). A file is
read once per process while it does not change (its resolved path, size and modification
time are its identity).

Uploads are kept under names made from their content (`keep`), so a file that a run
trained on is never replaced: a resume, a fork or a clone reads the same data.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

import numpy as np

from core.data import npz_archive
from core.data.dataset import Dataset, DatasetInfo, frozen, stratified_split
from core.data.held import KEPT
from core.store import modes

#: The largest file the lab reads: each process that trains on it holds it in memory.
MAX_BYTES = 200 * 2**20
#: The most memory a file's arrays may take once loaded, counted as the lab holds them
#: (features as float32, labels as int64) or as the file stores them where that is more:
#: a compressed file of 200 MB can hold a thousand times as much.
MAX_LOADED_BYTES = 2 * 2**30
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
    return _read(kind, os.fspath(path.resolve()), stat.st_size, stat.st_mtime_ns)


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


_DIGEST_CHARS = 16  # of a kept upload's name: 64 bits of its SHA-256
# A kept upload's file name: a made-safe stem holds no dot.
_KEPT_NAME = re.compile(rf"([A-Za-z0-9_-]+)\.([0-9a-f]{{{_DIGEST_CHARS}}})\.({'|'.join(FORMATS)})")


def keep(folder: Path, filename: str, content: bytes) -> str:
    """Checks an uploaded file and keeps it in `folder` as `STEM.DIGEST.EXT`: its name made
    safe, then the start of its content's SHA-256 (see `label`). A file is never replaced:
    the same content keeps the name it has, other content under the same name gets a
    name of its own. Returns its dataset name. Raises `BadDataFile`."""
    kind = Path(filename).suffix.removeprefix(".").lower()
    check_bytes(kind, content)
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", Path(filename).stem).strip("_")[:60] or "data"
    digest = hashlib.sha256(content).hexdigest()[:_DIGEST_CHARS]
    modes.make_folder(folder)
    path = folder / f"{stem}.{digest}.{kind}"
    if not path.exists():
        # A partial file of its own: two uploads of the same content at once both land.
        handle, partial = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".partial")
        with os.fdopen(handle, "wb") as file:
            file.write(content)
        modes.settle(partial)  # mkstemp's 0600, or the group's too
        os.replace(partial, path)  # whole, or not there: a run reading it never sees half
    return f"{kind}:{path.resolve()}"


def kept(folder: Path) -> list[str]:
    """The dataset names of the files kept in `folder`, by file name."""
    if not folder.is_dir():
        return []
    paths = sorted(p for p in folder.iterdir() if p.suffix.removeprefix(".") in FORMATS)
    return [f"{p.suffix.removeprefix('.')}:{p.resolve()}" for p in paths]


def shown_name(name: str) -> str:
    """A dataset name as a run's label and the pages show it: a file's by its file name, a
    kept upload's by the name it was uploaded under (made safe: `my_data.npz`), never the
    server's path to it; any other name as it is."""
    if not is_file(name):
        return name
    filename = Path(name.partition(":")[2]).name
    kept_name = _KEPT_NAME.fullmatch(filename)
    return filename if kept_name is None else f"{kept_name[1]}.{kept_name[3]}"


def label(name: str) -> str:
    """A dataset name as a picker shows it: a file's by its file name; a kept upload's as
    it was uploaded, with the start of its digest (`my_data.npz (1a2b3c4d)`)."""
    if not is_file(name):
        return name
    kept_name = _KEPT_NAME.fullmatch(Path(name.partition(":")[2]).name)
    digest = "" if kept_name is None else f" ({kept_name[2][:8]})"
    return f"your file {shown_name(name)}{digest}"


def _read(kind: str, path: str, size: int, mtime_ns: int) -> Dataset:
    """The dataset in the file at the resolved `path`, named `KIND:PATH`, kept (see
    `core.data.held`) once per file, however its name was spelled, while it does not
    change (its size and modification time are part of the key)."""
    key = ("file", kind, path, size, mtime_ns)
    if (kept := KEPT.get(key)) is not None:
        return kept
    with open(path, "rb") as file:
        dataset = (_from_npz if kind == "npz" else _from_csv)(f"{kind}:{path}", file)
    KEPT.put(key, dataset)
    return dataset


def _from_npz(name: str, file: BinaryIO) -> Dataset:
    """The dataset of a `.npz`, judged from its members' headers before any is read."""
    try:
        with npz_archive.open_archive(file) as archive:
            members = npz_archive.headers(archive, ARRAYS)
            missing = [key for key in ARRAYS if key not in members]
            if missing:
                raise BadDataFile(
                    f"dataset: the .npz lacks {', '.join(missing)} (it needs {', '.join(ARRAYS)})"
                )
            loaded = sum(map(_loaded_bytes, members.values()))
            if loaded > MAX_LOADED_BYTES:
                raise BadDataFile(
                    f"dataset: its arrays take {loaded / 2**30:,.1f} GB once loaded (features "
                    f"as float32); the limit is {MAX_LOADED_BYTES / 2**30:,.1f} GB"
                )
            arrays = {key: npz_archive.read(archive, member) for key, member in members.items()}
    except npz_archive.BadArchive as exc:
        raise BadDataFile(f"dataset: not a .npz the lab reads: {exc}") from None
    return from_arrays(name, arrays)


def _loaded_bytes(member: npz_archive.Member) -> int:
    """What an array takes once loaded: as the lab holds it (features as float32, labels
    as int64), or as it is stored where that is more (it is read as stored first)."""
    held = 4 if member.key.startswith("x") else 8
    return member.count * max(held, member.dtype.itemsize)


def _from_csv(name: str, file: BinaryIO) -> Dataset:
    table = _csv_table(file)
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
        if num_classes < 2 or num_classes > MAX_CLASSES:  # saying which, not the labels
            found = "every label is 0" if num_classes < 2 else f"a label is {MAX_CLASSES} or more"
            raise BadDataFile(f"dataset: needs 2 to {MAX_CLASSES} classes; {found}")
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
        x = x.astype(np.float32)
        x /= np.float32(255)  # bytes: pixels, scaled as images are (in place: one copy)
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


def _csv_table(file: BinaryIO) -> np.ndarray:
    """The numbers of a .csv, a row per line that holds values. Raises `BadDataFile`
    naming the row and column at fault, never what they hold."""
    try:
        rows = (line for _, line in _csv_lines(file))
        return np.loadtxt(rows, delimiter=",", dtype=np.float64, ndmin=2)
    except BadDataFile:
        raise
    except ValueError:  # NumPy's message quotes the line
        file.seek(0)
        fault = _csv_fault(file)
        raise BadDataFile(f"dataset: the .csv is not a table of numbers: {fault}") from None


def _csv_lines(file: BinaryIO) -> Iterator[tuple[int, str]]:
    """(row, text) of each line of a .csv that holds values: not blank, not only a `#`
    comment, not the header (a first such line that is not all numbers). Rows count the
    file's lines from 1. Raises `BadDataFile` for a line that is not UTF-8."""
    first = True
    for row, raw in enumerate(file, 1):
        try:
            line = raw.decode("utf-8-sig" if row == 1 else "utf-8")
        except UnicodeDecodeError:
            raise BadDataFile(f"dataset: the .csv's row {row} is not UTF-8 text") from None
        values = line.partition("#")[0]
        if not values.strip():
            continue
        if first:
            first = False
            if not _numeric(values):
                continue  # a header
        yield row, line


def _csv_fault(file: BinaryIO) -> str:
    """Where a .csv that NumPy could not read stops being a table of numbers."""
    width = None
    for row, line in _csv_lines(file):
        values = line.partition("#")[0].split(",")
        width = width or len(values)
        if len(values) != width:
            return f"row {row} has {len(values)} values where the rows before it have {width}"
        for column, value in enumerate(values, 1):
            try:
                float(value)
            except ValueError:
                return f"row {row}, column {column} is not a number"
    return "NumPy could not read it as one"


def _numeric(line: str) -> bool:
    try:
        [float(value) for value in line.split(",")]
    except ValueError:
        return False
    return True
