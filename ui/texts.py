"""Short human texts for runs: status badges, durations, numbers, knob summaries, and
what a model or a dataset is.

Anything a user typed (a run name, a tag) goes through `core.escaping.escape_markdown`
before it reaches Markdown, so that it shows as typed and never as a link, an image, a
colour or maths.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from core import data, models, readable
from core.data import files
from core.engine import RunStatus
from core.engine.api import Runs
from core.escaping import escape_markdown
from core.store import PER_LAYER_EVENT, Event

NONE = readable.NONE  # a missing value, in tables too (Streamlit's grid writes "None")
# Material icons: emoji render as empty boxes where no emoji font is installed.
STATUS_ICONS = {
    "queued": ("gray", ":material/schedule:"),
    "running": ("green", ":material/play_circle:"),
    "paused": ("orange", ":material/pause_circle:"),
    "completed": ("blue", ":material/check_circle:"),
    "stopped": ("gray", ":material/stop_circle:"),
    "diverged": ("red", ":material/trending_up:"),
    "failed": ("red", ":material/error:"),
    "interrupted": ("orange", ":material/cancel:"),
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
SHORT_NAMES = {"learning_rate": "lr"}


def badge(status: str) -> str:
    """The status as coloured Markdown with its icon, e.g. `:green[:material/...: running]`."""
    colour, icon = STATUS_ICONS.get(status, ("gray", ":material/circle:"))
    return f":{colour}[{icon} {status}]"


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
    """One format for every number the dashboard shows (`core.readable.number`): four
    significant digits, a power of ten past them, "–" for none."""
    return readable.number(value)


def steps(run: RunStatus) -> str:
    """The run's step of its total, `1,200/3,534`; the step alone while its total is not
    known yet (a run that has not started: "0/?" read as an error)."""
    return f"{run.step:,}" + (f"/{run.total_steps:,}" if run.total_steps else "")


def progress(run: RunStatus, loading: str | None = None) -> str:
    """A run's progress line: its step of its total, and while it trains its speed and ETA
    (a paused, queued or ended run has neither: a paused run's last speed would promise an
    end it is not nearing). Before its first step it says what it waits for: the engine
    `loading` TensorFlow (`Runs.loading`), or its data, its model and a first trace."""
    if run.step == 0 and run.status == "queued" and loading:
        return f"waiting for the engine to load {loading}, once per start of the lab"
    if run.step == 0 and run.status == "running":
        return "loading its data, building its model and tracing its first step"
    step = f"step {steps(run)}"
    if run.status != "running":
        return step
    speed = f"{run.steps_per_second:.1f} steps/s" if run.steps_per_second else ""
    eta = f"ETA {duration(run.eta_seconds)}" if run.eta_seconds else ""
    return " · ".join(p for p in (step, speed, eta) if p)


def before_first_step(runs: list[RunStatus], loading: str | None = None) -> str:
    """Why the charts of `runs`, none of which has logged a step, are empty: the engine is
    `loading` TensorFlow (`Runs.loading`) for a run queued, the runs prepare their first
    step, or wait for a place in the engine's queue; or they ended before one."""
    statuses = {run.status for run in runs}
    then = " The charts begin at the first step."
    if loading and "queued" in statuses:
        return (
            f"No step logged yet: the engine is loading {loading}, which it does once per "
            f"start of the lab (about half a minute).{then}"
        )
    if "running" in statuses:
        return (
            "No step logged yet: the runs load their data, build their models and trace "
            f"their first step.{then}"
        )
    if statuses & {"queued", "paused"}:
        return f"No step logged yet: the runs wait for the runs before them to end.{then}"
    return "No step was logged: the runs ended before their first."


def knobs(status: RunStatus) -> str:
    """The knobs that are on, at their current values, e.g. `lr 0.001 · radius 20`."""
    return " · ".join(
        f"{SHORT_NAMES.get(k, k)} {number(status.knobs[k])}"
        for k in KEY_KNOBS
        if status.knobs.get(k) is not None
    )


def label(status: RunStatus) -> str:
    """A run as a menu shows it (plain text, not Markdown): `name (id)`."""
    return f"{status.name} ({status.id})"


def described(field: str, name: str, data_dir: str | None = None) -> str:
    """A line of Markdown on the model or dataset `name` (`field`): its description, and
    the plugin file it comes from (a plugin's, as its engine published it in the store:
    shown as typed); a file's is told by its name, not read again here. A `tfds:` dataset
    is looked for in `data_dir`."""
    if field == "dataset" and files.is_file(name):
        return ""
    try:
        if field == "model":
            info = models.model_catalog.info(name)
        else:
            info = data.dataset_catalog.info(name, data_dir=data_dir)
    except ValueError as exc:
        return escape_markdown(str(exc).removeprefix(f"{field}: "))
    plugin = (
        "" if info.source == "core" else f" *(plugin: {escape_markdown(Path(info.source).name)})*"
    )
    return f"{escape_markdown(info.description)}{plugin}"


def per_layer_interval(events: list[Event]) -> str | None:
    """How often a run records its per-layer statistics now, from its latest interval
    event: "per-layer every 4 steps (within 2% of the step time)"; None before any."""
    latest = next((e.payload for e in reversed(events) if e.kind == PER_LAYER_EVENT), None)
    if latest is None:
        return None
    every = latest["every"]
    text = "per-layer every step" if every == 1 else f"per-layer every {every:,} steps"
    budget = latest.get("budget")
    return text if budget is None else f"{text} (within {budget:.0%} of the step time)"


def per_layer_intervals(engine: Runs, runs: list[RunStatus]) -> list[str]:
    """`name: per-layer every …` of each of `runs` that has recorded its interval."""
    shown = ((run, per_layer_interval(engine.events(run.id))) for run in runs)
    return [f"{escape_markdown(run.name)}: {text}" for run, text in shown if text]
