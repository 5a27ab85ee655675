"""Tests of `core.models`: the catalog, layer names, shapes, seeding, and training."""

import random
import threading

import keras
import numpy as np
import pytest

from core import data, models
from tests.imports import heavy_modules_after

NAMES = ["linear", "mlp", "lenet", "cnn"]
LAYERS = {
    "linear": ["image", "flatten", "logits"],
    "mlp": ["image", "flatten", "dense1", "dense2", "logits"],
    "lenet": [
        "image",
        *("conv1", "pool1", "conv2", "pool2", "flatten"),
        *("dense1", "dense2", "logits"),
    ],
    "cnn": ["image", "conv1", "pool1", "conv2", "pool2", "flatten", "dense1", "logits"],
}
SHAPES = {"mnist-5k": (28, 28, 1), "digits": (8, 8, 1), "cifar-like": (32, 32, 3)}


@pytest.fixture
def scrambled_global_seeds():
    """Sets Keras's global seeds (Python, NumPy, TF) and restores Python's and NumPy's."""
    python_state, numpy_state = random.getstate(), np.random.get_state()
    yield keras.utils.set_random_seed
    random.setstate(python_state)
    np.random.set_state(numpy_state)


def _weights(model):
    return [np.array(weight) for weight in model.get_weights()]


def _same_weights(a, b):
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_importing_core_models_does_not_import_keras():
    assert heavy_modules_after("import core.models; core.models.catalog()") == []


def test_catalog_names_every_architecture():
    assert [info.name for info in models.catalog()] == NAMES
    assert all(info.description for info in models.catalog())
    assert models.DEFAULT_MODEL in NAMES


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_models_are_built_with_named_layers_and_logit_outputs(name, shape):
    model = models.build(name, input_shape=shape, num_classes=10, seed=0)

    assert [layer.name for layer in model.layers] == LAYERS[name]
    assert model.built and model.weights
    assert model.get_layer("logits").activation is keras.activations.linear
    logits = model(np.zeros((3, *shape), np.float32))
    assert tuple(logits.shape) == (3, 10)


def test_linear_is_exactly_affine_in_its_input():
    """x·W + b, nothing else: a regression's squared error is then a quadratic in (W, b)."""
    model = models.build("linear", input_shape=(20,), num_classes=1, seed=3)
    assert [layer.name for layer in model.layers] == ["image", "flatten", "prediction"]
    kernel, bias = (np.asarray(w, np.float64) for w in model.get_weights())
    assert kernel.shape == (20, 1) and bias.shape == (1,) and model.count_params() == 21
    x = np.random.default_rng(0).normal(size=(50, 20)).astype(np.float32)
    np.testing.assert_allclose(model(x), x @ kernel + bias, rtol=1e-5, atol=1e-6)


def test_lenet_on_28x28_has_the_articles_400_features_and_61706_weights():
    model = models.build("lenet", input_shape=(28, 28, 1), num_classes=10, seed=0)
    assert model.get_layer("flatten").output.shape == (None, 400)
    assert model.count_params() == 61_706


def test_multitask_models_share_a_body_and_have_two_named_heads():
    model = models.build("lenet", input_shape=(8, 8, 1), num_classes=10, seed=0, multitask=True)
    assert {"digit", "parity"} <= {layer.name for layer in model.layers}
    assert "logits" not in {layer.name for layer in model.layers}
    assert model.get_layer("digit").input is model.get_layer("parity").input

    outputs = model(np.zeros((2, 8, 8, 1), np.float32))
    assert set(outputs) == {"digit", "parity"}
    assert tuple(outputs["digit"].shape) == (2, 10)
    assert tuple(outputs["parity"].shape) == (2, 2)


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_gives_identical_weights_whatever_the_global_seed(name, scrambled_global_seeds):
    def build(seed):
        return _weights(models.build(name, input_shape=(8, 8, 1), num_classes=10, seed=seed))

    scrambled_global_seeds(1)
    reference = build(5)
    scrambled_global_seeds(2)
    keras.random.uniform((4,))  # Advance Keras's global seed generator too.
    again = build(5)
    other = build(6)

    assert _same_weights(reference, again)
    kernels = zip(reference[::2], other[::2], strict=True)  # kernels, not the zero biases
    assert not any(np.array_equal(a, b) for a, b in kernels)
    assert all(not bias.any() for bias in reference[1::2])


def test_two_threads_building_at_once_get_identical_weights():
    def build():
        return _weights(
            models.build("cnn", input_shape=(28, 28, 1), num_classes=10, seed=3, multitask=True)
        )

    reference = build()
    results = [None] * 2
    start = threading.Barrier(2)

    def worker(i):
        start.wait()
        results[i] = build()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(_same_weights(result, reference) for result in results)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"name": "resnet"}, "model"),
        ({"input_shape": (28, 28)}, "input_shape"),
        ({"input_shape": (0, 28, 1)}, "input_shape"),
        ({"num_classes": 0}, "num_classes"),  # 1: a regression's one output
    ],
)
def test_bad_arguments_are_rejected_naming_the_field(kwargs, field):
    arguments = {"name": "lenet", "input_shape": (28, 28, 1), "num_classes": 10, "seed": 0}
    with pytest.raises(ValueError, match=f"^{field}: "):
        models.build(**{**arguments, **kwargs})


def _loss(model, x, y):
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    return float(loss(y, model(x)))


# Not `linear`: a softmax regression learns slower (0.64× its first loss in 30 steps);
# it is held exactly affine above, and trained to 1e-10 of its loss by `heavy_ball`.
@pytest.mark.parametrize("name", [name for name in NAMES if name != "linear"])
def test_every_hidden_layer_model_learns_mnist_5k_in_30_steps(name):
    dataset = data.load("mnist-5k")
    model = models.build(name, input_shape=dataset.input_shape, num_classes=10, seed=0)
    model.compile(
        optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    x, y = dataset.x_test[::2], dataset.y_test[::2]
    before = _loss(model, x, y)

    train = data.pipeline(dataset, "train", batch_size=64, seed=0)
    model.fit(train, steps_per_epoch=30, epochs=1, shuffle=False, verbose=0)

    assert _loss(model, x, y) < 0.6 * before


def test_multitask_model_learns_both_heads():
    dataset = data.load("mnist-5k")
    model = models.build(
        "lenet", input_shape=dataset.input_shape, num_classes=10, seed=0, multitask=True
    )
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer="adam", loss={"digit": loss, "parity": loss})
    x, y = dataset.x_test[::2], dataset.y_test[::2]

    def head_losses():
        outputs = model(x)
        return float(loss(y, outputs["digit"])), float(loss(y % 2, outputs["parity"]))

    digit_before, parity_before = head_losses()
    train = data.pipeline(dataset, "train", batch_size=64, seed=0, multitask=True)
    model.fit(train, steps_per_epoch=30, epochs=1, shuffle=False, verbose=0)
    digit_after, parity_after = head_losses()

    assert digit_after < 0.6 * digit_before
    assert parity_after < 0.9 * parity_before
