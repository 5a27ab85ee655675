"""Datasets read through TensorFlow Datasets (TFDS), and failing fast when they are absent.

`tfds.load` with no network retries for minutes before it gives up, so this module
looks for the prepared files on disk itself, reads them without TFDS's download logic
(`tfds.builder_from_directory`), and only asks TFDS to download when a 2-second probe
reaches the download server. Otherwise it raises `DatasetUnavailable` at once, saying how
to prepare the data.

Besides the catalog's, any prepared TFDS dataset is a dataset by the name `tfds:NAME`: an
image or tabular classification, whose supervised keys name an image or a fixed-shape
numeric tensor, and a class label. What it is is read from its prepared copy's JSON files
(`describe`, `info`), without TensorFlow, so the dashboard can check it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from core.data import files
from core.data.dataset import Dataset, DatasetInfo, DatasetUnavailable, make_dataset

PREFIX = "tfds:"

# TFDS downloads MNIST, Fashion-MNIST and CIFAR-10 (and its own prepared copies) from here.
_PROBE_URL = "https://storage.googleapis.com/"
_VERSION = re.compile(r"\d+\.\d+\.\d+")


def data_root(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The TFDS data directory: `data_dir`, else `$TFDS_DATA_DIR`, else `~/tensorflow_datasets`."""
    root = data_dir or os.environ.get("TFDS_DATA_DIR") or "~/tensorflow_datasets"
    return Path(root).expanduser()


def prepared_dir(name: str, root: Path) -> Path | None:
    """The newest prepared version of `name` under `root`, e.g. `root/mnist/3.0.1`, or `None`.

    A version counts as prepared once TFDS has written its `dataset_info.json` and
    `features.json`, which it does last, after the records.
    """
    versions = [
        path
        for path in root.joinpath(name).glob("*")
        if _VERSION.fullmatch(path.name)
        and (path / "dataset_info.json").is_file()
        and (path / "features.json").is_file()
    ]
    return max(versions, key=lambda path: tuple(map(int, path.name.split("."))), default=None)


def network_reachable(timeout: float = 2.0) -> bool:
    """Whether the TFDS download server answers within `timeout` seconds.

    The request runs in a daemon thread because a name lookup ignores socket timeouts;
    proxies set in the environment are honoured, as TFDS honours them.
    """
    request = urllib.request.Request(_PROBE_URL, method="HEAD")
    answered: list[bool] = []

    def probe() -> None:
        try:
            urllib.request.urlopen(request, timeout=timeout).close()
        except urllib.error.HTTPError:
            pass  # An error status is still an answer.
        except OSError:
            return
        answered.append(True)

    thread = threading.Thread(target=probe, name="tfds-network-probe", daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(answered)


def is_tfds(name: object) -> bool:
    """Whether `name` names a TFDS dataset by its TFDS name, `tfds:NAME`."""
    return isinstance(name, str) and name.startswith(PREFIX) and len(name) > len(PREFIX)


def prepared_names(root: Path) -> list[str]:
    """`tfds:NAME` for every dataset with a prepared version under `root`, by name."""
    if not root.is_dir():
        return []
    return [
        PREFIX + path.name
        for path in sorted(root.iterdir())
        if path.is_dir() and prepared_dir(path.name, root) is not None
    ]


@dataclasses.dataclass(frozen=True)
class Described:
    """What a prepared TFDS dataset is, read from its JSON files."""

    input_shape: tuple[int, ...]
    num_classes: int
    train_size: int
    images: bool


def describe(name: str, root: Path) -> Described:
    """Reads what the prepared TFDS dataset `name` (without its prefix) is.

    Raises:
        ValueError: it is not prepared under `root` (the message says how to prepare it),
            or it is not an image or tabular classification with `train` and `test`
            splits; the message names `dataset`.
    """
    version_dir = prepared_dir(name, root)
    if version_dir is None:
        raise ValueError(_how_to_prepare(name, root, "a tfds: dataset must be prepared"))
    try:
        info = json.loads((version_dir / "dataset_info.json").read_text())
        features = json.loads((version_dir / "features.json").read_text())
        x_key, y_key = _supervised_keys(info)
        found = features["featuresDict"]["features"]
        x_feature, y_feature = found[x_key], found[y_key]
        num_classes = int(y_feature["classLabel"]["numClasses"])
        images = "image" in x_feature
        spec = x_feature["image"] if images else x_feature["tensor"]
        shape = tuple(int(d) for d in spec["shape"]["dimensions"])
        sizes = {split["name"]: sum(map(int, split["shardLengths"])) for split in info["splits"]}
        train_size = sizes["train"]
        if "test" not in sizes:  # validation reads it
            raise KeyError("test")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"dataset: {PREFIX}{name} is not an image or tabular classification with train "
            f"and test splits the lab can read ({type(exc).__name__}: {exc}); its supervised "
            "keys must name an image or a fixed-shape numeric tensor, and a class label"
        ) from None
    if not shape or min(shape) < 1 or (not images and spec.get("dtype", "") == "string"):
        raise ValueError(f"dataset: {PREFIX}{name}'s examples have no fixed shape ({shape})")
    return Described(shape, num_classes, train_size, images)


def info(name: str, root: Path) -> DatasetInfo:
    """The `DatasetInfo` of `name`, `tfds:NAME`, prepared under `root` (see `describe`)."""
    tfds_name = name.removeprefix(PREFIX)
    described = describe(tfds_name, root)
    kind = "images" if described.images else "rows of features"
    return DatasetInfo(
        name,
        f"TFDS {tfds_name}: {kind} {described.input_shape}, {described.num_classes} "
        f"classes, {described.train_size:,} training examples.",
        described.input_shape,
        described.num_classes,
        described.train_size,
        offline=False,
    )


def _supervised_keys(info: dict[str, Any]) -> tuple[str, str]:
    keys = info["supervisedKeys"]
    if "tuple" in keys:  # TFDS 4.9 on
        first, second = keys["tuple"]["items"][:2]
        return first["featureKey"], second["featureKey"]
    return keys["input"], keys["output"]  # older copies


def load_tfds(name: str, root: Path, *, num_classes: int, label: str | None = None) -> Dataset:
    """Loads the `train` and `test` splits of the TFDS dataset `name` into memory, as
    the dataset called `label` (default: `name`): images scaled into [0, 1], or rows of
    features checked as a file's are.

    Reads the prepared copy under the data directory `root`. When there is none,
    downloads and prepares it there if the network is reachable.

    Raises:
        DatasetUnavailable: The data is not prepared and cannot be downloaded now; the
            message says how to prepare it.
    """
    version_dir = prepared_dir(name, root) or _download(name, root)

    import tensorflow_datasets as tfds

    builder = tfds.builder_from_directory(version_dir)
    splits = [
        tfds.as_numpy(builder.as_dataset(split=split, batch_size=-1, as_supervised=True))
        for split in ("train", "test")
    ]
    (x_train, y_train), (x_test, y_test) = splits
    label = label or name
    if x_train.ndim == 4:  # TFDS images: bytes, (N, height, width, channels)
        return make_dataset(
            label, (x_train, x_test), (y_train, y_test), num_classes=num_classes, scale=255.0
        )
    arrays = {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}
    # The label feature says how many classes there are, whatever the splits show.
    return dataclasses.replace(files.from_arrays(label, arrays), num_classes=num_classes)


def _download(name: str, root: Path) -> Path:
    if not network_reachable():
        raise DatasetUnavailable(_how_to_prepare(name, root, "the network is unreachable"))

    import tensorflow_datasets as tfds

    try:
        tfds.builder(name, data_dir=os.fspath(root)).download_and_prepare()
    except Exception as error:  # TFDS raises many types; every one means "not here".
        raise DatasetUnavailable(
            _how_to_prepare(name, root, f"downloading failed: {error}")
        ) from error
    version_dir = prepared_dir(name, root)
    if version_dir is None:
        raise DatasetUnavailable(_how_to_prepare(name, root, "TFDS wrote no prepared copy"))
    return version_dir


def _how_to_prepare(name: str, root: Path, reason: str) -> str:
    return (
        f"dataset: {name!r} is not prepared in {root} and {reason}. To prepare it, run\n"
        f'    python -c "import tensorflow_datasets as tfds; tfds.load({name!r})"\n'
        f"on a machine with network access, then copy its ~/tensorflow_datasets/{name} "
        f"directory to {root / name} here, or set TFDS_DATA_DIR to a directory that "
        f"holds {name}/."
    )
