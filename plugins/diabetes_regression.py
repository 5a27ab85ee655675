"""An example regression dataset plugin: disease progression after one year, from ten
baseline measurements of 442 diabetes patients (Efron et al., 2004).

With `problem="regression"` a run minimizes the mean squared error and reports the mean
absolute error (`mae`, `val_mae`) where a classification reports accuracy. The table ships
with scikit-learn, so it loads offline. Train it with `mlp`.
"""

import numpy as np
from sklearn.datasets import load_diabetes

from core.data import register_dataset

TEST_FRACTION = 0.2


@register_dataset(
    "diabetes",
    description="442 diabetes patients (Efron et al.): 10 measurements → disease progression "
    "a year later, in standard deviations; a regression",
    problem="regression",
)
def diabetes() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    table = load_diabetes()
    x, y = table.data.astype(np.float32), table.target.astype(np.float32)
    order = np.random.default_rng(0).permutation(len(y))  # a fixed split, any order in file
    test, train = np.split(order, [round(len(y) * TEST_FRACTION)])
    mean, std = x[train].mean(axis=0), x[train].std(axis=0)
    y_mean, y_std = y[train].mean(), y[train].std()
    x, y = (x - mean) / std, (y - y_mean) / y_std  # errors read in standard deviations
    return x[train], y[train], x[test], y[test]
