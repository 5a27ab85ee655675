"""Streamlit helpers shared by `app.py` and the pages: the engine, selections, widgets.

Only this package, `app.py` and `pages/` import Streamlit; `core` never does.
"""
