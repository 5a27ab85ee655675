"""The Live and Instruments charts of made-up runs, as one HTML page, to look at by eye.

    .venv/bin/python -m tests.chart_screens [OUT_DIR]     # default: test-artifacts/charts

Writes `charts.html` (two charts per row, as the pages lay them out, on Streamlit's dark
background) and, where Chromium is installed, `charts.png`. The runs are what makes
charts hard to read: three runs of five layers, knob changes a few steps apart, one run
that diverges, projection onto a radius. Not a test (pytest does not collect it).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import plotly.io

from core.charts import RunView, hyperparameter_figure, instrument_figures, live_figures
from core.store import Event, Metrics

STEPS = 3000
LAYERS = ("conv1", "conv2", "dense1", "dense2", "logits")
WIDTH = 1400


def made_up_run(index: int, *, diverges: bool = False) -> RunView:
    """A run whose loss falls, whose norm grows into a radius of 5, whose knobs change
    twice 30 steps apart; one that `diverges` blows up over its last 40 steps."""
    rng = np.random.default_rng(index)
    steps = np.arange(1, STEPS + 1)
    t = steps / STEPS
    noise = lambda scale: np.exp(rng.normal(0, scale, STEPS))  # noqa: E731
    loss = (2.3 * np.exp(-4 * t * (index + 1)) + 0.05) * noise(0.1)
    proposed = 5.5 * (1 - np.exp(-5 * t)) + 0.2 * noise(0.05)
    series = {
        "loss": loss,
        "accuracy": 1 - 0.9 * np.exp(-5 * t * (index + 1)),
        "val_accuracy": np.where(steps % 300 == 0, 0.85 + 0.03 * index, np.nan),
        "grad_norm": 3 * noise(0.3),
        "param_norm_proposed": proposed,
        "param_norm": np.minimum(proposed, 5.0),
        "radius": np.full(STEPS, 5.0),
        "projection_active": (proposed > 5.0).astype(float),
        "learning_rate": np.where(steps < 1000, 1e-2, 5e-3),
    }
    every = lambda k: np.where(steps % k == 0, 1.0, np.nan)  # noqa: E731
    series |= {
        "distance_from_init": 3 * np.sqrt(t),
        "alpha": every(20) * rng.normal(0.2, 0.4, STEPS),
        "sharpness": every(100) * 150 * np.sqrt(t),
        "noise_scale": every(50) * 300 * t * noise(0.3),
    }
    for j, layer in enumerate(LAYERS):
        series[f"distance_from_init/{layer}"] = (j + 1) / 2 * np.sqrt(t)
        series[f"step_norm/{layer}"] = 10.0 ** (-1 - j / 2) * noise(0.2)
        series[f"update_ratio/{layer}"] = 10.0 ** (-2 - j / 3) * noise(0.2)
        series[f"sparsity/{layer}"] = 0.9 * t**2 * (j + 1) / len(LAYERS)
    events = [knob(index, 1000, "learning_rate", 1e-2, 5e-3), knob(index, 1030, "radius", 6, 5)]
    if diverges:
        end = STEPS - 40
        blow_up = 10.0 ** np.linspace(0, 30, 40)
        for key in ("loss", "grad_norm", "param_norm_proposed"):
            series[key][end:] = series[key][end - 1] * blow_up
        series["loss"][-1] = np.inf
        events.append(Event(99, f"run{index}", STEPS, 0.0, "diverged", {"loss": np.inf}))
    events += [histogram(index, step) for step in range(300, STEPS + 1, 300)]
    return RunView(f"run{index}", f"run {index}", Metrics(steps, series), events, batch_size=64)


def histogram(index: int, step: int) -> Event:
    """Magnitudes per layer in 8 decades, the bulk sliding down as training goes on."""
    centre = 5 - 3 * step / STEPS
    counts = lambda j: np.exp(-((np.arange(8) - centre - j / 4) ** 2)).tolist()  # noqa: E731
    payload = {
        "edges": list(range(-8, 1)),
        "grad": {layer: counts(j) for j, layer in enumerate(LAYERS)},
        "weight": {layer: counts(-j) for j, layer in enumerate(LAYERS)},
    }
    return Event(step, f"run{index}", step, 0.0, "histogram", payload)


def knob(index: int, step: int, name: str, previous: float, value: float) -> Event:
    payload = {"name": name, "value": value, "previous": previous}
    return Event(step, f"run{index}", step, 0.0, "knob", payload)


def page(runs: list[RunView]) -> str:
    """Every figure, two by two, in one HTML page with Plotly inlined once."""
    rows = [
        {"optimizer": name, "learning_rate": lr, "weight_decay": 1e-4, "val_accuracy": acc}
        for name, lr, acc in (("sgd", 0.1, 0.8), ("adamw", 1e-3, 0.9), ("adam", 1e-4, 0.6))
    ]
    figures = {
        **live_figures(runs),
        **instrument_figures(runs),
        "hyperparameters": hyperparameter_figure(rows, "val_accuracy"),
    }
    cells = []
    for i, figure in enumerate(figures.values()):
        figure.update_layout(template="plotly_dark", width=WIDTH // 2 - 20)
        cells.append(plotly.io.to_html(figure, full_html=False, include_plotlyjs=i == 0))
    return (
        "<html><body style='background:#0e1117;margin:0'>"
        f"<div style='display:grid;grid-template-columns:1fr 1fr;width:{WIDTH}px'>"
        + "".join(f"<div>{cell}</div>" for cell in cells)
        + "</div></body></html>"
    )


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    runs = [made_up_run(0), made_up_run(1), made_up_run(2, diverges=True)]
    html = out / "charts.html"
    html.write_text(page(runs), encoding="utf-8")
    print(f"Wrote {html}.")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium:
        png = out / "charts.png"
        subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--hide-scrollbars",
                f"--window-size={WIDTH},4200",
                "--virtual-time-budget=5000",
                f"--screenshot={png}",
                html.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
        )
        print(f"Wrote {png}.")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "test-artifacts/charts"))
