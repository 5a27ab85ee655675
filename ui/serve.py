"""`python -m ui.serve run app.py [FLAGS]`: `streamlit run app.py [FLAGS]`, with every
page framed by `app.py` from the server's first visit on.

Streamlit runs a `pages/` folder's scripts bare (multipage apps' first design, before
`st.navigation`) until some script run has called `st.navigation`, the first `app.py` run
does. A server whose first visitor opened a page's address (a bookmark of
`/Live?view=presentation`) ran that page, and every other page asked for after it,
without the frame: no page config, no sidebar, Streamlit's own page list instead of the
lab's, until someone opened Home. The lab routes with `st.navigation` only, so it says so
before the server starts.

It also puts the server's uploads in the presenter's hands, within bounds
(`ui.upload_guard`): Streamlit's upload route takes a file from any session; and has the
presenter URL's response set the cookie that keeps a presenter who reloads the presenter
(`ui.presenter_cookie`).

Two things wait for no visitor. The store's engine is launched as the server starts
(`ui.state.shared_engine`), not at the first visit: it imports TensorFlow and traces a
first step (about half a minute on a loaded laptop), which a first click on Start used to
wait for. And Plotly's JavaScript is copied into the app's `static/` folder
(`ui.live_chart`), which Streamlit looks for as it starts: a fresh checkout, which has
none, logged "no static folder found".
"""

from __future__ import annotations

import contextlib
import sys

from streamlit.runtime.pages_manager import PagesManager
from streamlit.web.cli import main

from core.store import StoreError
from ui import live_chart, presenter_cookie, state, upload_guard

if __name__ == "__main__":
    PagesManager.uses_pages_directory = False
    upload_guard.install()
    presenter_cookie.install()
    live_chart.served_plotly()
    with contextlib.suppress(StoreError):  # the pages say why, with the page around it
        state.shared_engine()
    sys.argv = ["streamlit", *sys.argv[1:]]
    main(prog_name="streamlit")
