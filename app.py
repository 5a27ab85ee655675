"""Optimizer Lab: the frame around every page (`streamlit run app.py`).

It sets the page's title and layout, draws the sidebar, checks the store once (an unusable
store stops every page with the reason), cleans the address's parameters
(`ui.address`), and runs the page the address names. The pages
themselves (`ui.nav.PAGES`) hold only their view.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from ui import address, nav, presentation, roles, state

# A file, sent inline: a Material icon as the page icon is fetched from fonts.gstatic.com,
# which a lab without internet cannot reach (the sidebar's icons come with Streamlit).
FAVICON = Path(__file__).parent / "ui" / "favicon.svg"

page, title = nav.open_page()  # the sidebar draws the links itself
st.set_page_config(
    page_title=title,
    page_icon=FAVICON,
    layout="wide",
    initial_sidebar_state=presentation.sidebar_state(),
)
roles.admit()  # before the sidebar, which shows a viewer less
nav.sidebar()
address.clean(state.engine())  # before the page, which reads it
page.run()
