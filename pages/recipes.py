"""Recipes: the classic optimizer findings, each reproduced in one click by the lab's own
runs and judged from what they store (see `core.recipes`), the same for every session."""

from __future__ import annotations

import streamlit as st

from ui import recipe_view, state

st.title(":material/menu_book: Recipes")
recipe_view.intro()
engine = state.engine()
launched = recipe_view.Launched.read(engine)
recipe_view.keep_current(engine, launched)
if (shown := recipe_view.shown(engine, launched)) is not None:
    recipe_view.live(engine, shown, launched.active(shown))
    st.divider()
recipe_view.gallery(engine, launched, shown)
