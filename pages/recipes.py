"""Recipes: the classic optimizer findings, each reproduced in one click by the lab's own
runs and judged from what they store (see `core.recipes`)."""

from __future__ import annotations

import streamlit as st

from ui import recipe_view, state

st.title(":material/menu_book: Recipes")
st.markdown(
    "Published optimizer findings, reproduced live: **Run it** starts a finding's runs, "
    "its key chart fills in as they train, and the verdict says whether the claim held "
    "here, with the numbers it rests on. A finding that does not reproduce says so."
)
engine = state.engine()
if (started := recipe_view.launched()) is not None:
    recipe_view.live(engine, *started)
    st.divider()
recipe_view.gallery(engine)
