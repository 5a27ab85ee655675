"""Optimizer Lab: the frame around every page (`streamlit run app.py`).

It sets the page's title and layout, draws the sidebar, checks the store once (an unusable
store stops every page with the reason), and runs the page the address names. The pages
themselves (`ui.nav.PAGES`) hold only their view.
"""

from __future__ import annotations

import streamlit as st

from ui import nav, state

page, title, icon = nav.open_page()  # the sidebar draws the links itself
st.set_page_config(page_title=title, page_icon=icon, layout="wide")
nav.sidebar()
state.engine()
page.run()
