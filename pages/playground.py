"""Playground: the lab's own optimizers raced on a 2-D loss surface, as the knobs move,
without a run or the engine (the paths come from the page server's worker process)."""

from __future__ import annotations

import streamlit as st

from ui import follow_presenter, nav, playground_form, playground_view, state

st.title(":material/scatter_plot: Playground")
playground_view.intro()
engine = state.engine()
follow_presenter.follow_state(engine, nav.PLAYGROUND)  # a viewer: the presenter's widgets
playground_form.seed()
race = playground_form.read()
playground_form.controls(race)
if not race.valid:
    st.info("Nothing drawn until every field reads: see the fields marked.", icon=":material/edit:")
elif (racers := playground_view.computed(race)) is not None:
    playground_view.chart(race, racers)
    playground_view.said(racers)
playground_form.start_fields(race)
playground_form.panels(race)
follow_presenter.publish(engine, [], page=nav.PLAYGROUND, state=playground_form.shown_state())
