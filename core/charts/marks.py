"""Marks: what happened to a run at a step (a live knob change, a divergence), drawn on
each of its charts as a vertical line with a marker at the top that says what on hover."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.charts.style import number
from core.charts.traces import RunView, Trace
from core.store import DIVERGED_EVENT, KNOB_EVENT


@dataclass(frozen=True)
class Mark:
    """Something that happened to a run at a step, marked on its charts."""

    step: int
    kind: str  # the event's kind: KNOB_EVENT or DIVERGED_EVENT
    text: str  # shown on hover


# How each kind of mark looks: line colour, line dash, marker symbol.
MARK_STYLES = {
    KNOB_EVENT: ("#9e9e9e", "dot", "triangle-down"),
    DIVERGED_EVENT: ("#ff4d4d", "dash", "x"),
}


def marks_of(run: RunView) -> list[Mark]:
    """The run's live knob changes and divergence, with what to say about each."""
    marks = []
    for event in run.events:
        if event.kind == KNOB_EVENT:
            change = event.payload
            what = f"{change['name']} {number(change.get('previous'))} → {number(change['value'])}"
            text = f"{what} at step {event.step:,} · {run.text}"
            marks.append(Mark(event.step, event.kind, text))
        elif event.kind == DIVERGED_EVENT:
            marks.append(
                Mark(event.step, event.kind, f"{run.text} diverged at step {event.step:,}")
            )
    return marks


def mark_layers(marks: Sequence[Mark]) -> tuple[list[Trace], list[Trace]]:
    """(shapes, traces): a vertical line at every marked step, and a marker at its top
    that says what happened on hover (every mark at that step, one per line), instead of
    labels that would overlap where marks crowd. The markers are on the y axis `y2`."""
    shapes, traces = [], []
    for kind, (colour, dash, symbol) in MARK_STYLES.items():
        texts: dict[int, list[str]] = {}
        for mark in marks:
            if mark.kind == kind:
                texts.setdefault(mark.step, []).append(mark.text)
        if not texts:
            continue
        steps = sorted(texts)
        shapes += [
            {
                "type": "line",
                "x0": step,
                "x1": step,
                "y0": 0,
                "y1": 1,
                "yref": "paper",
                "layer": "below",
                "line": {"dash": dash, "width": 1, "color": colour},
            }
            for step in steps
        ]
        traces.append(
            {
                "type": "scatter",
                "x": steps,
                "y": [1] * len(steps),
                "yaxis": "y2",
                "name": kind,
                "mode": "markers",
                "marker": {"symbol": symbol, "size": 10, "color": colour},
                "cliponaxis": False,
                "showlegend": False,
                "text": ["<br>".join(texts[step]) for step in steps],
                "hovertemplate": "%{text}<extra></extra>",
            }
        )
    return shapes, traces
