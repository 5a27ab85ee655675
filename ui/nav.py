"""The lab's pages for the frame (`app.py`): their list, the navigation between them, and
the sidebar every page shows (the pages, and what is training now)."""

from __future__ import annotations

import streamlit as st

from core.escaping import escape_markdown
from ui import roles, state, texts

HOME_TITLE = "Home"
# The lab's pages, in the sidebar's order: (file, title, icon). The first is the home page,
# at the site's root; each other page's address is its title (`/Live`).
PAGES = (
    ("pages/home.py", HOME_TITLE, ":material/home:"),
    ("pages/1_Train.py", "Train", ":material/rocket_launch:"),
    ("pages/2_Live.py", "Live", ":material/monitoring:"),
    ("pages/3_Compare.py", "Compare", ":material/compare:"),
    ("pages/4_Sweep.py", "Sweep", ":material/explore:"),
    ("pages/5_Optimizers.py", "Optimizers", ":material/function:"),
    ("pages/6_Recipes.py", "Recipes", ":material/menu_book:"),
)
#: The pages only the presenter of a live demo sees (`ui.roles`): they start runs.
PRESENTERS_ONLY = frozenset({"pages/1_Train.py"})


def open_page() -> tuple[st.Page, str]:
    """The page the address names (`st.navigation` over `PAGES`), with its browser-tab
    title."""
    # No icon: st.navigation would make a page's Material icon the tab's icon, fetched
    # from fonts.gstatic.com (the sidebar's links draw theirs with Streamlit's own font).
    pages = [
        (st.Page(path, title=title, default=path == PAGES[0][0]), title) for path, title, _ in PAGES
    ]
    page = st.navigation([page for page, _ in pages], position="hidden")
    # Looked up, not read from `page`: outside a Streamlit server (`python app.py`) a page
    # keeps no title.
    _, title = next(entry for entry in pages if entry[0] is page)
    return page, "Optimizer Lab" if title == HOME_TITLE else f"{title} · Optimizer Lab"


def sidebar() -> None:
    with st.sidebar:
        st.markdown("### :material/science: Optimizer Lab")
        for path, label, icon in PAGES:
            if path not in PRESENTERS_ONLY or roles.presents():
                st.page_link(path, label=label, icon=icon)
        training_now()


# Always ticking (a run started in another tab or from the CLI shows up here too), but
# slower than a page's own refresh: every tick costs each open tab's browser.
@st.fragment(run_every=state.SIDEBAR_REFRESH_SECONDS)
def training_now() -> None:
    """The runs not ended, with their step, total and status, refreshed every 5 s."""
    active = [run for run in state.engine().list() if run.active]
    if active:
        st.caption("Training now")
    for run in active:
        st.caption(
            f"{texts.badge(run.status)} {escape_markdown(run.name)} · "
            f"{run.step}/{run.total_steps or '?'}"
        )
