"""Real TFDS-prepared datasets, tiny, written by the tests themselves (no network)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def prepare(
    data_dir: Path,
    class_name: str,
    features: Mapping[str, Any],
    splits: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    supervised_keys: tuple[str, str] | None = None,
    version: str = "1.0.0",
) -> None:
    """Prepares the dataset `class_name` (TFDS names it in snake case: `TinyRows` →
    `tiny_rows`) with these `features` (a `FeaturesDict`'s) and examples per split, as
    `tfds.load` would have, under `data_dir`."""
    import tensorflow_datasets as tfds

    def _info(self: Any) -> Any:
        return tfds.core.DatasetInfo(
            builder=self,
            features=tfds.features.FeaturesDict(dict(features)),
            supervised_keys=supervised_keys,
        )

    def _split_generators(self: Any, dl_manager: Any) -> dict[str, Any]:
        return {name: self._generate_examples(name) for name in splits}

    def _generate_examples(self: Any, split: str) -> Any:
        yield from enumerate(splits[split])

    builder = type(
        class_name,
        (tfds.core.GeneratorBasedBuilder,),
        {
            "VERSION": tfds.core.Version(version),
            "_info": _info,
            "_split_generators": _split_generators,
            "_generate_examples": _generate_examples,
        },
        skip_registration=True,
    )
    builder(data_dir=str(data_dir)).download_and_prepare()
