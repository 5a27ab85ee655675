"""Datasets read through TensorFlow Datasets (TFDS), and failing fast when they are absent.

`tfds.load` with no network retries for about 205 s before it gives up, so this module
looks for the prepared files on disk itself, reads them without TFDS's download logic
(`tfds.builder_from_directory`), and only asks TFDS to download when a 2-second probe
reaches the download server. Otherwise it raises `DatasetUnavailable` at once, saying how
to prepare the data.
"""

from __future__ import annotations

import os
import re
import threading
import urllib.error
import urllib.request
from pathlib import Path

from core.data.dataset import Dataset, DatasetUnavailable, make_dataset

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


def load_tfds(name: str, root: Path, *, num_classes: int) -> Dataset:
    """Loads the `train` and `test` splits of the TFDS dataset `name` into memory.

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
    return make_dataset(
        name, (x_train, x_test), (y_train, y_test), num_classes=num_classes, scale=255.0
    )


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
