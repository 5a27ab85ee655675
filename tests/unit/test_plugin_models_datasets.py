"""Model and dataset plugins: `@register_model`, `@register_dataset`, the example plugins
(a tiny ViT, the wine table), and what a broken plugin gives."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from core import data, models, optimizers
from core.engine import RunConfig
from core.knobs import InvalidInput
from core.plugin_shelf import Shelf
from core.store.paths import PROJECT_ROOT

EXAMPLES = PROJECT_ROOT / "plugins"


@pytest.fixture(scope="module")
def examples() -> None:
    errors = optimizers.load_plugins(EXAMPLES)
    assert not {path: why for path, why in errors.items() if Path(path).parent == EXAMPLES}


@pytest.mark.slow  # loads the example plugins, each tried in a child process first
def test_the_vit_plugin_is_a_seeded_model_with_the_seeds_layer_names(examples) -> None:
    info = models.model_catalog.info("tiny_vit")
    assert info.images and info.source == str(EXAMPLES / "tiny_vit.py")
    assert "tiny_vit" in [m.name for m in models.catalog(plugins=True)]
    assert "tiny_vit" not in [m.name for m in models.catalog()]  # built-ins only
    first, again, other = (
        models.build("tiny_vit", input_shape=(8, 8, 1), num_classes=10, seed=seed)
        for seed in (3, 3, 4)
    )
    assert first.output.shape == (None, 10)
    weights = [model.get_weights() for model in (first, again, other)]
    assert all(map(np.array_equal, weights[0], weights[1]))
    assert not all(map(np.array_equal, weights[0], weights[2]))
    paths = [v.path for v in first.trainable_variables]
    # What the seeds' per-layer decay rules address: norms, biases, the embeddings.
    assert {"patch_embedding/kernel", "position_embedding/embeddings"} <= set(paths)
    # gamma and beta of two norms per block and of the last
    assert sum("norm" in p for p in paths) == 2 * (2 * 2 + 1)
    with pytest.raises(ValueError, match="multitask: tiny_vit is a plugin's model"):
        models.build("tiny_vit", input_shape=(8, 8, 1), num_classes=10, seed=0, multitask=True)


@pytest.mark.slow  # loads the example plugins, each tried in a child process first
def test_the_wine_plugin_is_a_standardized_table(examples) -> None:
    info = data.dataset_catalog.info("wine")
    assert (info.input_shape, info.num_classes, info.train_size) == ((13,), 3, 142)
    assert "142 train / 36 test" in info.description
    wine = data.load("wine")
    np.testing.assert_allclose(wine.x_train.mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(wine.x_train.std(axis=0), 1, atol=1e-4)
    assert set(np.unique(wine.y_test)) == {0, 1, 2}


@pytest.mark.slow  # loads the example plugins, each tried in a child process first
def test_run_configs_take_plugins_and_refuse_what_they_cannot_train(examples) -> None:
    config = RunConfig.from_dict({"model": "tiny_vit", "dataset": "digits"})
    assert (config.model, config.dataset) == ("tiny_vit", "digits")
    assert RunConfig.from_dict({"model": "mlp", "dataset": "wine"}).dataset == "wine"
    with pytest.raises(InvalidInput) as refused:
        RunConfig.from_dict({"model": "tiny_vit", "dataset": "wine", "multitask": True})
    assert "needs images; wine has examples of shape (13,)" in refused.value.errors["model"]
    assert "needs a built-in model" in refused.value.errors["multitask"]
    with pytest.raises(InvalidInput) as unknown:
        RunConfig.from_dict({"model": "vit_huge", "dataset": "imagenet"})
    assert "tiny_vit" in unknown.value.errors["model"]
    assert "wine" in unknown.value.errors["dataset"]


def plugin_file(folder: Path, name: str, source: str) -> None:
    (folder / name).write_text(textwrap.dedent(source))


@pytest.mark.slow  # imports each plugin in a child process first
def test_every_dataset_form_is_read_alike_and_broken_plugins_are_reported(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("OPTLAB_PLUGINS", str(tmp_path))  # reported: the plugins folder's
    plugin_file(
        tmp_path,
        "forms.py",
        """
        import numpy as np
        import tensorflow as tf
        from core.data import register_dataset

        rng = np.random.default_rng(0)
        X = rng.normal(size=(40, 3)).astype("float32")
        Y = (X[:, 0] > 0).astype("int64")

        @register_dataset("t_mapping", description="a mapping")
        def mapping():
            return {"x_train": X[:30], "y_train": Y[:30], "x_test": X[30:], "y_test": Y[30:]}

        @register_dataset("t_tuple", description="a tuple")
        def as_tuple():
            return X[:30], list(Y[:30]), X[30:], Y[30:]

        @register_dataset("t_tfdata", description="tf.data, batched and not")
        def tfdata():
            train = tf.data.Dataset.from_tensor_slices((X[:30], Y[:30])).batch(7)
            return train, tf.data.Dataset.from_tensor_slices((X[30:], Y[30:]))

        @register_dataset("t_full_batches", description="tf.data, batches of a known size")
        def full_batches():
            train = tf.data.Dataset.from_tensor_slices((X[:30], Y[:30]))
            test = tf.data.Dataset.from_tensor_slices((X[30:], Y[30:]))
            return train.batch(10, drop_remainder=True), test.batch(5, drop_remainder=True)

        @register_dataset("t_junk", description="returns junk")
        def junk():
            return "not data"

        @register_dataset("t_nan", description="a NaN")
        def nan():
            x = X.copy()
            x[3, 1] = np.nan
            return x[:30], Y[:30], x[30:], Y[30:]
        """,
    )
    plugin_file(
        tmp_path,
        "taken.py",
        """
        from core.models import register_model
        register_model("lenet", description="again")(lambda **kwargs: None)
        """,
    )
    errors = optimizers.load_plugins()
    assert "a model named 'lenet' is already registered" in errors[str(tmp_path / "taken.py")]
    forms = ("t_mapping", "t_tuple", "t_tfdata", "t_full_batches")
    loaded = [data.load(name) for name in forms]
    for dataset in loaded[1:]:
        for split in ("train", "test"):
            for mine, theirs in zip(dataset.split(split), loaded[0].split(split), strict=True):
                np.testing.assert_array_equal(mine, theirs)
    assert data.dataset_catalog.info("t_tfdata").input_shape == (3,)
    with pytest.raises(ValueError, match=r"^dataset: the plugin's 't_junk' failed: .*returned str"):
        data.dataset_catalog.info("t_junk")
    with pytest.raises(ValueError, match="x_train holds NaN"):
        data.dataset_catalog.info("t_nan")
    reported = data.dataset_catalog.PLUGINS.errors()[str(tmp_path / "forms.py")]
    assert "dataset 't_" in reported  # by file, as the Optimizers page and the CLI show
    with pytest.raises(InvalidInput, match="t_junk"):
        RunConfig.from_dict({"model": "mlp", "dataset": "t_junk"})


@pytest.mark.slow  # imports the plugin in a child process first
def test_a_plugin_model_that_outputs_the_wrong_shape_is_refused_naming_it(tmp_path) -> None:
    plugin_file(
        tmp_path,
        "shapes.py",
        """
        import keras
        from core.models import register_model

        @register_model("t_two_outputs", description="always two logits")
        def two(input_shape, num_classes, seed):
            inputs = keras.Input(input_shape)
            return keras.Model(inputs, keras.layers.Dense(2)(keras.layers.Flatten()(inputs)))

        @register_model("t_not_a_model", description="a layer")
        def layer(input_shape, num_classes, seed):
            return keras.layers.Dense(num_classes)
        """,
    )
    assert not optimizers.load_plugins(tmp_path).get(str(tmp_path / "shapes.py"))
    with pytest.raises(ValueError, match=r"model: t_two_outputs's .* must output \(batch, 10\)"):
        models.build("t_two_outputs", input_shape=(4,), num_classes=10, seed=0)
    assert models.build("t_two_outputs", input_shape=(4,), num_classes=2, seed=0)
    with pytest.raises(ValueError, match=r"returned Dense, not a keras\.Model"):
        models.build("t_not_a_model", input_shape=(4,), num_classes=3, seed=0)


def test_a_process_without_tensorflow_takes_the_infos_from_a_source() -> None:
    shelf: Shelf = Shelf("model", models.ModelInfo, lambda entry: entry, frozenset({"mlp"}))
    published = [{"name": "p", "description": "d", "images": True, "source": "/x/p.py"}]
    shelf.use_source(lambda: (published, {"/x/q.py": "model 'q': boom"}))
    assert shelf.infos() == [models.ModelInfo("p", "d", True, "/x/p.py")]
    assert shelf.info("p").images and shelf.info("nope") is None
    assert shelf.errors() == {"/x/q.py": "model 'q': boom"}
    dataset_shelf: Shelf = Shelf(
        "dataset", data.DatasetInfo, lambda entry: entry, frozenset({"digits"})
    )
    dataset = data.DatasetInfo("t", "t", (13,), 3, 100, True, "/x/t.py")
    dataset_shelf.use_source(lambda: ([dict(dataset.__dict__, input_shape=[13])], {}))
    assert dataset_shelf.info("t") == dataset  # the shape a tuple again, as JSON lost it
    with pytest.raises(ValueError, match="already registered"):
        dataset_shelf.add("digits", object(), "/x/t.py")
