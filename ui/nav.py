"""The lab's pages for the frame (`app.py`): their registry, the navigation between them,
and the sidebar every page shows (the pages, and what is training now).

`PAGES` is the one place a page's file, title, icon, address and audience are written;
everything else (the frame, a button that switches pages, the tests, the bench) names a
page by its entry here (`nav.LIVE.file`, `nav.LIVE.url`), so that a page is renamed or
moved in one line.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from core.escaping import escape_markdown
from ui import roles, state, texts


@dataclass(frozen=True)
class Page:
    """A page of the lab.

    Its file's name gives it neither its place (the sidebar follows `PAGES`) nor its
    address (`url_path`, given to `st.Page` rather than inferred from the file's name):
    the addresses are the ones users have shared and bookmarked (`/Live?runs=...`), and
    they stay as they are whatever the files are called.
    """

    file: str  # the script, from app.py's folder (`st.Page`, `st.switch_page`)
    title: str  # the sidebar's label; the browser tab's title
    icon: str  # a Material icon, drawn by the sidebar's link
    url_path: str  # the address after the server's root (`Live`); "" for the root
    presenters_only: bool = False  # shown only to a room's presenter (`ui.roles`)

    @property
    def url(self) -> str:
        """The page's address, to append to the server's root: `/Live`; "" for the page
        at the root itself."""
        return f"/{self.url_path}" if self.url_path else ""


HOME = Page("pages/home.py", "Home", ":material/home:", "")
# Train starts runs: a viewer of a live demo has no link to it (its page says why).
TRAIN = Page("pages/train.py", "Train", ":material/rocket_launch:", "Train", presenters_only=True)
LIVE = Page("pages/live.py", "Live", ":material/monitoring:", "Live")
COMPARE = Page("pages/compare.py", "Compare", ":material/compare:", "Compare")
SWEEP = Page("pages/sweep.py", "Sweep", ":material/explore:", "Sweep")
OPTIMIZERS = Page("pages/optimizers.py", "Optimizers", ":material/function:", "Optimizers")
RECIPES = Page("pages/recipes.py", "Recipes", ":material/menu_book:", "Recipes")
PLAYGROUND = Page("pages/playground.py", "Playground", ":material/scatter_plot:", "Playground")
#: The lab's pages, in the sidebar's order; the first, Home, is at the server's root.
PAGES = (HOME, TRAIN, LIVE, COMPARE, SWEEP, OPTIMIZERS, RECIPES, PLAYGROUND)


def at(url_path: str) -> Page | None:
    """The page at address `url_path` (`Live`; "" for Home), None for none."""
    return next((page for page in PAGES if page.url_path == url_path), None)


def open_page() -> tuple[st.Page, Page, str]:
    """The page the address names (`st.navigation` over `PAGES`), with its entry here
    and its browser-tab title."""
    # No icon: st.navigation would make a page's Material icon the tab's icon, fetched
    # from fonts.gstatic.com (the sidebar's links draw theirs with Streamlit's own font).
    pages = {
        page: st.Page(page.file, title=page.title, url_path=page.url_path, default=page is HOME)
        for page in PAGES
    }
    shown = st.navigation(list(pages.values()), position="hidden")
    # Looked up, not read from `shown`: outside a Streamlit server (`python app.py`) a page
    # keeps no title.
    page = next(page for page, entry in pages.items() if entry is shown)
    return shown, page, "Optimizer Lab" if page is HOME else f"{page.title} · Optimizer Lab"


def sidebar() -> None:
    with st.sidebar:
        st.markdown("### :material/science: Optimizer Lab")
        for page in PAGES:
            if not page.presenters_only or roles.presents():
                st.page_link(page.file, label=page.title, icon=page.icon)
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
        st.caption(f"{texts.badge(run.status)} {escape_markdown(run.name)} · {texts.steps(run)}")
