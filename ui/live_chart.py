"""`live_chart`: a Plotly chart that redraws in place when its figure changes.

`st.plotly_chart` gives a chart whose figure changed a new element, so a chart refreshed
every few seconds was unmounted and drawn from nothing at each refresh, in each open tab,
on the cores the runs train on. This component keeps its `<div>` and hands each new
figure to `Plotly.react`, which redraws only what changed. What watching costs a run,
browser included, is figure 9 of `bench/results.md` (`bench/watching.py`).

Plotly's JavaScript comes from the installed plotly package, copied once under the app's
`static/` folder (served by Streamlit: `server.enableStaticServing`), where the browser
loads it once and caches it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Final

import plotly
import plotly.graph_objects as go
import plotly.io
import plotly.offline
import streamlit as st

STATIC: Final = Path(__file__).resolve().parent.parent / "static"  # beside app.py
PLOTLY_JS: Final = f"plotly-{plotly.offline.get_plotlyjs_version()}.min.js"
CONFIG: Final = {"displaylogo": False, "modeBarButtonsToRemove": ["lasso2d", "select2d"]}

# Streamlit's dark chart theme (what `st.plotly_chart` applies in the browser), as
# defaults under each figure's own layout.
COLORWAY = "#83c9ff #0068c9 #ffabab #ff2b2b #7defa1 #29b09d #ffd16a #ff8700 #6d3fc0 #d5dae5"
GRID = "#31333F"
TEXT = "#e6eaf1"
BACKGROUND = "#171614"
FONT = '"Source Sans", sans-serif'
AXIS: Final = {
    "gridcolor": GRID,
    "zerolinecolor": GRID,
    "tickcolor": GRID,
    "tickfont": {"color": TEXT, "size": 12},
    "title": {"font": {"color": TEXT, "size": 14}},
    "automargin": True,
    # Where a figure gives no number format: 3×10⁻⁵ rather than Plotly's SI prefixes
    # (928.17μ, which a room reads as a typo).
    "exponentformat": "power",
}
TEMPLATE: Final = go.layout.Template(
    layout={
        "colorway": COLORWAY.split(),
        "font": {"color": TEXT, "family": FONT, "size": 12},
        "title": {"font": {"family": FONT, "size": 16, "color": TEXT, "weight": 600}, "x": 0},
        "paper_bgcolor": "rgba(0, 0, 0, 0)",  # the page's
        "plot_bgcolor": "rgba(0, 0, 0, 0)",
        "xaxis": {**AXIS, "showgrid": False, "zeroline": False},
        "yaxis": AXIS,
        "legend": {"font": {"color": TEXT}},
        # Upright at the right: lying along the top, the bar covered a title on hover.
        "modebar": {"orientation": "v"},
        "hoverlabel": {
            "bgcolor": BACKGROUND,
            "bordercolor": "rgba(237, 235, 232, 0.2)",
            "font": {"color": TEXT, "family": FONT, "size": 12},
        },
    }
)


def served_plotly() -> str:
    """The URL, relative to the page, of Plotly's JavaScript, copied into `STATIC` when it
    is not there yet (atomically: several app processes may start at once). `ui.serve`
    has it copied before the server starts, which warns of a static folder it lacks."""
    target = STATIC / PLOTLY_JS
    if not target.exists():
        STATIC.mkdir(exist_ok=True)
        source = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
        partial = target.with_name(f".{target.name}.{os.getpid()}")
        shutil.copyfile(source, partial)
        os.replace(partial, target)
    return f"app/static/{PLOTLY_JS}"


_mount = st.components.v2.component(
    "optlab_live_chart",
    js=(Path(__file__).with_name("live_chart.js")).read_text(),
    isolate_styles=False,  # Plotly styles its hover labels and mode bar in the page's head
)


def drawn(figure: go.Figure) -> str:
    """`figure` as the chart takes it: in Streamlit's dark theme (set as its template), as
    JSON (what `ui.shared_figures` keeps for every session)."""
    figure.update_layout(template=TEMPLATE)
    # Unvalidated, as st.plotly_chart does: the figure was validated as it was built.
    return plotly.io.to_json(figure, validate=False)


def live_chart(figure: go.Figure | str, *, key: str) -> None:
    """Draws `figure` (or a figure already `drawn`); the chart under `key` keeps its zoom
    across redraws when the figure sets `layout.uirevision`."""
    data: dict[str, Any] = {
        "figure": figure if isinstance(figure, str) else drawn(figure),
        "config": CONFIG,
        "plotly": served_plotly(),
    }
    _mount(data=data, key=key)
