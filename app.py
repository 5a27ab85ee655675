"""Optimizer Lab: the frame around every page (`streamlit run app.py`).

It sets the page's title and layout, admits the presenter of a room, leads a room's
viewers to the presenter's page (`ui.follow_presenter`), draws the sidebar, checks the
store once (an unusable store stops every page with the reason), cleans the address's
parameters (`ui.address`), and runs the page the address names. The pages
themselves (`ui.nav.PAGES`) hold only their view.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from ui import address, follow_presenter, nav, presentation, roles, state

# A file, sent inline: a Material icon as the page icon is fetched from fonts.gstatic.com,
# which a lab without internet cannot reach (the sidebar's icons come with Streamlit).
FAVICON = Path(__file__).parent / "ui" / "favicon.svg"

page, entry, title = nav.open_page()  # the sidebar draws the links itself
st.set_page_config(
    page_title=title,
    page_icon=FAVICON,
    layout="wide",
    initial_sidebar_state=presentation.sidebar_state(),
)
roles.admit()  # before the sidebar, which shows a viewer less
engine = state.engine()
# Before anything is drawn: a viewer of a room may be led to the presenter's page.
follow_presenter.lead_or_follow(engine, entry)
nav.sidebar()
follow_presenter.keep_up(engine)
address.clean(engine)  # before the page, which reads it
page.run()
