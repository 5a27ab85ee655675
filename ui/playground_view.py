"""The Playground's race: its paths computed, drawn over the surface, and said in words.

The chart (`ui.playground_chart`) reports a click on the surface, which moves the start,
and, for a room's presenter, each play it starts and the step a play or its slider ends
on, which viewers' charts follow. Under it,
a line a racer says where it ended, or how it diverged, and what its knobs did: the
projections onto its ball, the clipped steps, weight decay's pull.
"""

from __future__ import annotations

import streamlit as st

from core.charts.playground import Lane, lanes, race_figure
from core.escaping import escape_markdown
from core.knobs import InvalidInput
from core.playground import SURFACES
from core.playground.worker import WorkerError
from core.readable import number
from ui import follow_presenter, playground_chart, playground_form, playground_paths
from ui.playground_form import PLAYING, STEP, Race

CHART = "playground:chart"


def intro() -> None:
    """What the page does."""
    st.caption(
        "The lab's own optimizers, their Keras classes stepping a point (x, y) down a 2-D "
        "loss surface, redrawn as the knobs move. Click the surface to start elsewhere; "
        "Play races them step by step."
    )


def computed(race: Race) -> list[Lane] | None:
    """The race's paths, one a racer in its colour; None (said why) when the worker
    could not compute them."""
    first = playground_paths.worker().answered == 0
    try:
        with st.spinner(
            "Loading TensorFlow for the playground (once a server)…"
            if first
            else "Computing the paths…"
        ):
            paths = [
                (
                    racer.label,
                    playground_paths.path(
                        race.surface, racer.optimizer, racer.knobs, race.start, race.steps
                    ),
                )
                for racer in race.racers
            ]
    except (InvalidInput, WorkerError) as exc:
        st.error(f"Not computed: {escape_markdown(str(exc))}", icon=":material/error:")
        return None
    return lanes(paths)


def chart(race: Race, racers: list[Lane]) -> None:
    """The race over its surface, at the step this session shows."""
    step = st.session_state.get(STEP)
    step = step if isinstance(step, int) and 0 <= step < race.steps else None
    figure = race_figure(SURFACES[race.surface], racers, step=step)
    playground_chart.playground_chart(
        figure,
        key=CHART,
        step=step,
        play=st.session_state.get(PLAYING),
        report=follow_presenter.leads(),
        on_start=_clicked,
        on_step=_stopped,
        on_play=_started,
    )


def _clicked() -> None:
    """The chart's callback: a click on the surface moves the start there."""
    if (point := playground_chart.clicked(CHART)) is not None:
        playground_form.start_at(*point)


def _stopped() -> None:
    """The chart's callback: the step its play or slider ended on, for the room."""
    st.session_state[STEP] = playground_chart.reported(CHART)


def _started() -> None:
    """The chart's callback: a play it started, which the room's charts play too."""
    st.session_state[PLAYING] = playground_chart.played(CHART)


def said(racers: list[Lane]) -> None:
    """A line a racer: where it ended (or how it diverged), and what its knobs did."""
    for lane in racers:
        st.markdown(
            f"**{escape_markdown(lane.label)}** "
            + "; ".join([_ending(lane), *_geometry(lane)])
            + "."
        )


def _ending(lane: Lane) -> str:
    path = lane.path
    if path.divergence is not None:
        return f"{path.divergence}, out of the view"
    x, y = path.points[-1]
    taken = len(path.points) - 1
    return (
        f"ends at ({number(x)}, {number(y)}), loss {number(path.losses[-1])}, after "
        f"{taken:,} step{'' if taken == 1 else 's'}"
    )


def _geometry(lane: Lane) -> list[str]:
    """What the knobs that the chart draws did, in words."""
    knobs, path = lane.path.knobs, lane.path
    said = []
    if (radius := knobs.get("radius")) is not None:
        projected = int(path.projected.sum())
        said.append(
            f"projected back onto the ball of radius {number(radius)} (the dashed circle) "
            f"at {projected:,} steps, ringed"
            if projected
            else f"never left the ball of radius {number(radius)} (the dashed circle)"
        )
    if (clip := knobs.get("clip_norm")) is not None:
        clipped = int(path.clipped.sum())
        said.append(
            f"its gradient clipped to length {number(clip)} at {clipped:,} steps "
            "(diamonds): no longer step there"
            if clipped
            else f"its gradient never longer than the clip norm {number(clip)}"
        )
    if decay := knobs.get("weight_decay"):
        pull = number(decay * knobs["learning_rate"])
        said.append(
            f"weight decay λ = {number(decay)} pulls every step toward the origin by "
            f"η·λ = {pull} of the point (the arrow)"
        )
    if l2 := knobs.get("l2"):
        said.append(
            f"L2 λ = {number(l2)} adds λ·(x, y) to the gradient: a pull toward the origin "
            "(the arrow)"
        )
    return said
