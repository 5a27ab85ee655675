"""The sidebar every page shows: the pages of the lab, and what is training now."""

from __future__ import annotations

import streamlit as st

from ui import state, texts

PAGES = (
    ("app.py", "Home", ":material/home:"),
    ("pages/1_Train.py", "Train", ":material/rocket_launch:"),
    ("pages/2_Live.py", "Live", ":material/monitoring:"),
    ("pages/3_Compare.py", "Compare", ":material/compare:"),
    ("pages/4_Sweep.py", "Sweep", ":material/explore:"),
    ("pages/5_Optimizers.py", "Optimizers", ":material/function:"),
)


def sidebar() -> None:
    with st.sidebar:
        st.markdown("### :material/science: Optimizer Lab")
        for path, label, icon in PAGES:
            st.page_link(path, label=label, icon=icon)
        training_now()


# Always ticking (a run started in another tab or from the CLI shows up here too), but
# slower than a page's own refresh: every tick costs each open tab's browser.
@st.fragment(run_every=state.SIDEBAR_REFRESH_SECONDS)
def training_now() -> None:
    """The runs not ended, with their step, total and status, refreshed every second."""
    active = [run for run in state.engine().list() if run.active]
    if active:
        st.caption("Training now")
    for run in active:
        st.caption(
            f"{texts.badge(run.status)} {texts.literal(run.name)} · "
            f"{run.step}/{run.total_steps or '?'}"
        )
