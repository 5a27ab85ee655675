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
(`ui.upload_guard`): Streamlit's upload route takes a file from any session.
"""

from __future__ import annotations

import sys

from streamlit.runtime.pages_manager import PagesManager
from streamlit.web.cli import main

from ui import upload_guard

if __name__ == "__main__":
    PagesManager.uses_pages_directory = False
    upload_guard.install()
    sys.argv = ["streamlit", *sys.argv[1:]]
    main(prog_name="streamlit")
