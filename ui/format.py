"""Short human texts for runs: status badges, durations, knob summaries."""

from __future__ import annotations

import math
from typing import Any

from core.engine import RunStatus

STATUS_ICONS = {
    "queued": "⏳",
    "running": "🟢",
    "paused": "⏸️",
    "completed": "✅",
    "stopped": "⏹️",
    "diverged": "💥",
    "failed": "❌",
    "interrupted": "⚠️",
}
KEY_KNOBS = (
    "learning_rate",
    "radius",
    "weight_decay",
    "clip_norm",
    "top_k",
    "noise_std",
    "prune_threshold",
)


def badge(status: str) -> str:
    return f"{STATUS_ICONS.get(status, '•')} {status}"


def duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "–"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def number(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def knobs(status: RunStatus) -> str:
    """The knobs that are on, e.g. `lr 0.001 · radius 20`."""
    hp = status.config.get("hyperparameters", {})
    names = {"learning_rate": "lr"}
    return " · ".join(
        f"{names.get(k, k)} {number(hp[k])}" for k in KEY_KNOBS if hp.get(k) is not None
    )


def label(status: RunStatus) -> str:
    return f"{status.name} ({status.id})"
