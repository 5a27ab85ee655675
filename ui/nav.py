"""The sidebar every page shows: the pages of the lab, and what is training now."""

from __future__ import annotations

import streamlit as st

from ui import format, state

PAGES = (
    ("app.py", "Home", "🏠"),
    ("pages/1_Train.py", "Train", "🚀"),
    ("pages/2_Live.py", "Live", "📈"),
    ("pages/3_Compare.py", "Compare", "📊"),
    ("pages/4_Sweep.py", "Sweep", "🧭"),
    ("pages/5_Optimizers.py", "Optimizers", "📐"),
)


def sidebar() -> None:
    with st.sidebar:
        st.markdown("### 🧪 Optimizer Lab")
        for path, label, icon in PAGES:
            st.page_link(path, label=label, icon=icon)
        active = [run for run in state.engine().list() if run.active]
        if active:
            st.caption("Training now")
            for run in active:
                st.caption(
                    f"{format.badge(run.status)} {run.name} · {run.step}/{run.total_steps or '?'}"
                )
