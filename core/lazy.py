"""`lazy_module`: a module that is imported on first use, not at import time.

Declarations that the light processes read (the dashboard, `--help`) live beside code
that runs on TensorFlow: an instrument declares its interval field next to the traced
maths that measures it. Such a module names `tf = lazy_module("tensorflow")` instead of
importing it, so that reading its declarations imports nothing heavy (the idea of
scientific Python's SPEC 1, lazy loading, for one name).
"""

from __future__ import annotations

import importlib
import types
from typing import Any


class _LazyModule(types.ModuleType):
    """Stands for the module of its name; the first attribute read imports it."""

    def __getattr__(self, attribute: str) -> Any:
        module = importlib.import_module(self.__name__)
        # Later reads find the attributes here, without another lookup.
        self.__dict__.update(module.__dict__)
        return getattr(module, attribute)


def lazy_module(name: str) -> Any:
    """A stand-in for module `name` that imports it when one of its attributes is read."""
    return _LazyModule(name)
