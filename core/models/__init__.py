"""Model architectures: a catalog, and seeded builders of Keras models that output logits.

    >>> from core import models
    >>> [info.name for info in models.catalog()]
    ['linear', 'mlp', 'lenet', 'cnn']
    >>> model = models.build("lenet", input_shape=(28, 28, 1), num_classes=10, seed=0)

Importing this package does not import TensorFlow or Keras; `build` imports Keras.
"""

from core.models.building import build
from core.models.model_catalog import DEFAULT_MODEL, ModelInfo, catalog, register_model

__all__ = ["DEFAULT_MODEL", "ModelInfo", "build", "catalog", "register_model"]
