"""Live: watch one or more runs train, steer them, and read their charts as they grow."""

from __future__ import annotations

import time

import streamlit as st

from core.charts import INSTRUMENT_HELP, instrument_figures, layer_figures, training_figures
from core.charts.view_legend import view_legend
from core.engine import RunStatus
from core.engine.api import Runs
from core.engine.repeats import groups
from ui import (
    follow_presenter,
    live_panel,
    presentation,
    roles,
    shared_figures,
    state,
    texts,
    views,
)
from ui.live_chart import drawn, live_chart

presenting, per_row = presentation.toggle()
if not presenting:  # a projector's first screen is for the charts
    st.title(":material/monitoring: Live")
SELECTION = "live_runs"
CHARTS = "live_charts"  # the group of charts picked
FIRST_POINT_WAIT = 30.0  # seconds a new run's charts are looked at every second
engine = state.engine()

follow_presenter.follow_page(engine, SELECTION, state.WATCH, CHARTS)
# In the presentation view the run picker goes under the charts (drawn first, shown last).
above, below = st.container(), st.container()
with below if presenting else above:
    runs, selected = views.pick_runs(
        engine,
        SELECTION,
        state.WATCH,
        default=lambda runs: [r.id for r in runs if r.active][:4] or [r.id for r in runs[:1]],
    )
if not selected:
    st.info(
        "Nothing to watch yet: start a run on **Train**, or the demo race on **Home**."
        if roles.presents()
        else "Nothing to watch yet: the presenter's runs show here as they start.",
        icon=":material/info:",
    )
    st.stop()
any_active = any(runs[i].active for i in selected)


# One group of charts at a time: each chart is redrawn in every open tab at every refresh.
VIEWS = {
    "Training": training_figures,
    "Per layer": layer_figures,
    "Instruments": instrument_figures,
}
GROUPS = "Groups"  # the repeats watched, as means with bands
LEGEND = "legend"  # the drawing's view legend (a figure of a legend alone), beside its charts'


def recent(run: RunStatus) -> bool:
    """Whether `run` started (or was queued) less than `FIRST_POINT_WAIT` ago."""
    return time.time() - run.created < FIRST_POINT_WAIT


# A run's first point comes a second or two after its start: until every watched run
# that started (or was queued) in the last half minute has one, the charts look every
# second, so that the first refresh after it draws it.
waiting = {i for i in selected if runs[i].active and runs[i].step == 0 and recent(runs[i])}


# In a room the charts tick even when no run trains: the presenter publishes its view at
# each tick, and a viewer follows it at each of its own.
@st.fragment(
    run_every=state.refresh_interval(
        any_active or follow_presenter.in_room(),
        state.REFRESH_SECONDS if waiting else state.CHART_REFRESH_SECONDS,
    )
)
def charts(
    engine: Runs,
    listed: dict[str, RunStatus],
    run_ids: list[str],
    waiting: set[str],
    per_row: int | None,
) -> None:
    """One group of charts, redrawn less often than the panels: each redraw costs every
    open tab's browser more than the page server, on the cores the runs train on.
    `per_row` charts a row in projector type (the presentation view), or None."""
    watched = groups(listed[run_id] for run_id in run_ids).values()
    names = [*VIEWS, GROUPS] if any(len(members) > 1 for members in watched) else list(VIEWS)
    if per_row:  # one row: the projector's first screen is for the charts
        pick, zoom = st.columns([4, 1], vertical_alignment="bottom")
    else:
        pick, zoom = st.container(), st.container()
    follow_presenter.lead_charts(engine, CHARTS)
    view = pick.segmented_control("Charts", names, default="Training", key=CHARTS)
    view = view or "Training"  # a click on the chosen one deselects it
    follow_presenter.publish(engine, run_ids, view)
    with zoom:
        start, end = views.step_range("live")
    watching = [engine.status(run_id) for run_id in run_ids]
    logged = {run.id: engine.last_logged_step(run.id) for run in watching}
    if all(step is None for step in logged.values()):  # charts of nothing: say why instead
        st.info(texts.before_first_step(watching, engine.loading()), icon=":material/schedule:")
        return
    if view == "Per layer":
        st.caption(" · ".join(texts.per_layer_intervals(engine, watching)))
    if view == "Instruments":
        st.caption(
            "Measured each at its own interval (the run's `*_every` fields; about 20 times "
            "a run when left empty), so that together they cost a bounded share of the "
            "step time. Heat strips show the first selected run."
        )

    def draw() -> dict[str, str]:
        shown = [views.run_view(engine, run, start, end) for run in watching]
        figures = (
            views.group_figures(engine, listed, shown, start, end)
            if view == GROUPS
            else VIEWS[view](shown)
        )
        legend: dict[str, str] = {}
        if per_row:  # one legend for the view, but for groups, whose bands are their own
            if one_legend := view != GROUPS:
                runs = {run.text: run.tint(i) for i, run in enumerate(shown)}
                figure = presentation.legend_figure(view_legend(figures.values(), runs))
                legend[LEGEND] = drawn(figure)
            figures = presentation.for_projector(figures, per_row, one_legend=one_legend)
        return legend | {key: drawn(figure) for key, figure in figures.items()}

    # Every session that shows these runs as they are now, the same way, shares one drawing
    # (a fresh one while a run's first point is awaited: that refresh is to draw it).
    colours = state.colours()
    shows = tuple((r.id, r.name, r.status, colours.colour(r.id)) for r in watching)
    version = tuple(logged.values())
    fresh_for = 0.0 if waiting else None
    drawing = shared_figures.shared((view, start, end, per_row, shows), version, draw, fresh_for)
    if LEGEND in drawing:
        live_chart(drawing[LEGEND], key=f"chart:{LEGEND}")
    shown_charts = {key: chart for key, chart in drawing.items() if key != LEGEND}
    views.show_in_columns(shown_charts, captions=INSTRUMENT_HELP, live=True, per_row=per_row or 2)
    if waiting and all(
        logged[run_id] is not None or not recent(listed[run_id]) for run_id in waiting
    ):
        st.rerun()  # their first points are drawn (or late): back to the slower redraws


if presenting:
    with above:
        charts(engine, runs, selected, waiting, per_row)
        presentation.cards(engine, runs, selected)
else:
    for run_id in selected:
        live_panel.run_panel(engine, runs[run_id], runs)
    charts(engine, runs, selected, waiting, None)
