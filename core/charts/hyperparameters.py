"""Parallel coordinates of a sweep's hyperparameters against what its runs reached."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from core.charts.layout import figure
from core.charts.style import number
from core.escaping import escape_html

CHARACTER = 7  # px: a wide character of the tick labels' font, so no label is cut
LEVEL_LABELS = 4  # axes whose labels stay level; more are tilted by `LABEL_ANGLE`
LABEL_ANGLE = -20


def hyperparameter_figure(rows: Sequence[Mapping[str, float | str]], target: str) -> go.Figure:
    """Parallel coordinates of hyperparameters against `target` (e.g. final validation
    accuracy), one line per run, coloured by `target`.

    `rows` holds one mapping per run, column → value, e.g. `{"optimizer": "adamw",
    "learning_rate": 1e-3, "batch_size": 64.0, "val_accuracy": 0.91}`; a run may lack
    columns that others have. A column with a string in any row is categorical (one tick
    per category; a run without it shows "—"), drawn even when every run has the same
    (it says which optimizer these runs share); the others are numeric (NaN where
    missing), on a log₁₀ axis labelled in full when they span more than 100×, and left out
    when they never vary. Categorical columns come first, `target` last.
    """
    columns = list(dict.fromkeys(key for row in rows for key in row if key != target))
    values = {key: [row.get(key) for row in rows] for key in columns}
    categorical = [key for key in columns if any(isinstance(v, str) for v in values[key])]
    dimensions = [
        *(_categorical_dimension(key, values[key]) for key in categorical),
        *(_numeric_dimension(key, values[key]) for key in columns if key not in categorical),
        _numeric_dimension(target, [row.get(target) for row in rows], target=True),
    ]
    dimensions = [d for d in dimensions if d is not None]
    traces = []
    if rows:
        colour = np.nan_to_num(np.array([row.get(target, np.nan) for row in rows], dtype=float))
        traces.append(
            {
                "type": "parcoords",
                # Room above the axes for their labels, and right of them for the colour bar.
                "domain": {"x": [0, 0.85], "y": [0, 0.8]},
                "dimensions": dimensions,
                # Tilted when many: level, the labels of neighbouring axes ran into each
                # other at 1024 px ("epsilon_inside_sqrtwarmup_steps").
                "labelangle": LABEL_ANGLE if len(dimensions) > LEVEL_LABELS else 0,
                "line": {
                    "color": colour,
                    "colorscale": "Viridis",
                    "showscale": True,
                    "colorbar": {"title": {"text": target, "side": "right"}},
                },
            }
        )
    chart = figure(f"hyperparameters/{target}", f"Hyperparameters and {target}", traces)
    if traces:  # the first axis's tick labels stand left of it: room for the longest
        chart.update_layout(margin={"l": max(chart.layout.margin.l or 0, _left(dimensions[0]))})
    return chart


def _left(first: Mapping[str, Any]) -> int:
    """The left margin, in pixels, that the first axis's tick labels (e.g. `projected_gd`)
    and half its centred title need, at about `CHARACTER` pixels a character."""
    longest = max((len(text) for text in first.get("ticktext", ())), default=0)
    return round(CHARACTER * max(longest + 1, len(first["label"]) / 2)) + 10


def _categorical_dimension(key: str, values: Sequence[object]) -> dict[str, Any]:
    """A parallel axis with a tick per category, in sorted order (numbers, as seeds are,
    by value: 2 before 10)."""
    labels = ["—" if v is None else str(v) for v in values]
    categories = sorted(set(labels), key=_in_order)
    return {
        "label": key,
        "values": [categories.index(label) for label in labels],
        "tickvals": list(range(len(categories))),
        "ticktext": [escape_html(category) for category in categories],  # a dataset's path
        "range": [-0.5, len(categories) - 0.5],  # a single category too has an extent
    }


def _in_order(label: str) -> tuple[bool, float, str]:
    """Numbers first, by value; then text, alphabetically."""
    try:
        return False, float(label), label
    except ValueError:
        return True, 0.0, label


def _numeric_dimension(
    key: str, values: Sequence[object], *, target: bool = False
) -> dict[str, Any] | None:
    """A parallel axis; None if every value is missing, or (unless it is the `target`)
    all are equal. On a log₁₀ axis, with every decade labelled, when its values span more
    than 100×."""
    numbers = np.array([np.nan if v is None else v for v in values], dtype=float)
    if np.all(np.isnan(numbers)):
        return None
    low, high = np.nanmin(numbers), np.nanmax(numbers)
    if target:
        return {"label": key, "values": numbers}
    if low == high:
        return None
    if not (low > 0 and high / low > 100):
        return {"label": key, "values": numbers}
    decades = range(int(np.ceil(np.log10(low))), int(np.floor(np.log10(high))) + 1)
    return {
        "label": f"{key} (log)",
        "values": np.log10(numbers),
        "tickvals": list(decades),
        "ticktext": [number(10.0**d) for d in decades],
    }
