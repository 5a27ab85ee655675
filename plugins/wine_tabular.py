"""An example dataset plugin: the UCI wine table, 13 chemical measurements → 3 cultivars.

Drop a file like this one into `plugins/` (or the folder named by `OPTLAB_PLUGINS`) and the
dataset appears in Train, the CLI (`--dataset wine`) and sweeps. The table ships with
scikit-learn, so it loads offline. Train it with `mlp` (rows, not images).
"""

import numpy as np
from sklearn.datasets import load_wine

from core.data import register_dataset
from core.data.dataset import stratified_split


@register_dataset(
    "wine",
    description="178 wines (UCI), 13 chemical measurements each, in 3 cultivars: a table, "
    "standardized by the training rows",
)
def wine() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    table = load_wine()
    train, test = stratified_split(table.target, test_fraction=0.2)
    x = table.data.astype(np.float32)
    mean, std = x[train].mean(axis=0), x[train].std(axis=0)
    x = (x - mean) / std  # the scales differ by 10⁴ (proline vs hue)
    return x[train], table.target[train], x[test], table.target[test]
