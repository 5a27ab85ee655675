"""The catalog of model architectures: names and one-line descriptions, the plugins'
(`@register_model`) included.

Pure Python on purpose: the dashboard lists models without waiting for TensorFlow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.plugin_shelf import Shelf, source_file

DEFAULT_MODEL = "lenet"


@dataclass(frozen=True)
class ModelInfo:
    """What a model architecture is, known without building it.

    Attributes:
        name: The name `build` takes, e.g. `"lenet"`.
        description: One line for a picker or a `--help` text.
        images: Whether it needs images, `(height, width, channels)`; else any shape.
        source: `"core"`, or the plugin file that registered it.
    """

    name: str
    description: str
    images: bool = True
    source: str = "core"


_CATALOG = (
    ModelInfo(
        "linear",
        "Linear: Flatten → logits, the output head alone (a regression's loss is then "
        "quadratic in the weights).",
        images=False,
    ),
    ModelInfo(
        "mlp", "Multilayer perceptron: Flatten → Dense 128 → Dense 64 → logits.", images=False
    ),
    ModelInfo(
        "lenet",
        "LeNet-5 (LeCun et al., 1998) with ReLU and max pooling: "
        "Conv 6@5×5 → pool → Conv 16@5×5 → pool → Dense 120 → Dense 84 → logits.",
    ),
    ModelInfo(
        "cnn",
        "A small modern conv net: Conv 32@3×3 → pool → Conv 64@3×3 → pool → Dense 128 → logits.",
    ),
)
_BY_NAME = {info.name: info for info in _CATALOG}

#: A plugin's model: a function of `input_shape`, `num_classes` and `seed` returning a
#: `keras.Model` that outputs `num_classes` logits.
ModelBuilder = Callable[..., Any]


@dataclass(frozen=True)
class PluginModel:
    info: ModelInfo
    build: ModelBuilder


PLUGINS: Shelf[PluginModel, ModelInfo] = Shelf(
    "model", ModelInfo, lambda plugin: plugin.info, frozenset(_BY_NAME)
)


def register_model(
    name: str, *, description: str, images: bool = False
) -> Callable[[ModelBuilder], ModelBuilder]:
    """Function decorator that adds a model to the lab, from a file in the plugins folder.

    ```python
    @register_model("tiny_vit", description="...", images=True)
    def tiny_vit(input_shape, num_classes, seed): ...  # a keras.Model of logits
    ```

    The function is called with keyword arguments, `input_shape` (one example's shape),
    `num_classes` and `seed` (seed every initializer from it, so that a seed gives the
    same weights), and returns a built `keras.Model` whose output is `num_classes` logits
    (`num_classes` is 1 for a regression dataset: the output is then the prediction).
    `images=True` says it needs `(height, width, channels)` examples.
    """

    def decorate(build: ModelBuilder) -> ModelBuilder:
        if not callable(build):
            raise TypeError(f"@register_model({name!r}) needs a function, got {build!r}")
        info = ModelInfo(name, str(description), bool(images), source_file(build))
        PLUGINS.add(name, PluginModel(info, build), info.source)
        return build

    return decorate


def catalog(*, plugins: bool = False) -> list[ModelInfo]:
    """Every architecture `build` knows, smallest first; with `plugins`, the plugins'
    after them (loading the plugins folder, unless this process takes their infos from
    the engine: see `Shelf.use_source`)."""
    return [*_CATALOG, *(PLUGINS.infos() if plugins else ())]


def info(name: str) -> ModelInfo:
    """The `ModelInfo` called `name`; a plugin's is looked for when no built-in has it.

    Raises:
        ValueError: no model has that name; the message names the field `model` and
            lists the valid names.
    """
    if isinstance(name, str) and name in _BY_NAME:
        return _BY_NAME[name]
    found = PLUGINS.info(name) if isinstance(name, str) else None
    if found is None:
        known = ", ".join(m.name for m in catalog(plugins=True))
        raise ValueError(f"model: unknown model {name!r} (known: {known})")
    return found
