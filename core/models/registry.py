"""The catalog of model architectures: names and one-line descriptions.

Pure Python on purpose: the dashboard lists models without waiting for TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MODEL = "lenet"


@dataclass(frozen=True)
class ModelInfo:
    """What a model architecture is, known without building it.

    Attributes:
        name: The name `build` takes, e.g. `"lenet"`.
        description: One line for a picker or a `--help` text.
        images: Whether it needs images, `(height, width, channels)`; else any shape.
    """

    name: str
    description: str
    images: bool = True


_CATALOG = (
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


def catalog() -> list[ModelInfo]:
    """Every architecture `build` knows, smallest first."""
    return list(_CATALOG)


def info(name: str) -> ModelInfo:
    """The `ModelInfo` called `name`.

    Raises:
        ValueError: `name` is not in the catalog; the message names the field `model` and
            lists the valid names.
    """
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(f"model: unknown model {name!r} (known: {', '.join(_BY_NAME)})") from None
