"""Live's presentation view, for a projector: the charts first, in type that the back of
a room reads at 1024×768, two or three a row, with the run cards shrunk to a line each.

The view is kept in the address (`?view=presentation`), so a presenter opens it (or
reloads it) straight into the view, with the sidebar folded away.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Final

import plotly.graph_objects as go
import streamlit as st

from core.charts.style import layer_style
from core.charts.view_legend import ViewLegend
from core.engine import RunStatus
from core.engine.api import Runs
from core.escaping import escape_markdown
from ui import address, state, texts

SWITCH: Final = "presentation:on"  # the toggle's key
PER_ROW: Final = "presentation:per_row"  # charts a row, for the session
# Sizes in px that a projected 1024×768 page shows legibly from ten metres (the page's
# own are 12-14 px: a chart title, ticks and legend then read as smudges).
TITLE_SIZE: Final = 18
TITLE_LINE: Final = 24  # px a line of title takes
TITLE_TOP: Final = 10  # px above a chart's title
# Characters of title a line holds, by charts a row, on a 1024 px page without sidebar.
TITLE_CHARACTERS: Final = {2: 48, 3: 32}
TICK_SIZE: Final = 15
AXIS_TITLE_SIZE: Final = 17
LEGEND_SIZE: Final = 15
HEIGHT: Final = 360
NEUTRAL: Final = "#c8c8c8"  # a series' line in the legend: the colours are the runs'
LAYERS_SAID: Final = "layers: their run's colour, lightest first"
LEGEND_ONLY: Final = "legend only"  # a figure's `meta`: a legend alone, sized to it


def on() -> bool:
    """Whether the page is in the presentation view (as its address says)."""
    return st.query_params.get(address.VIEW) == address.PRESENTATION


def sidebar_state() -> str:
    """The sidebar as a page opens: folded in the presentation view, where the charts
    want the whole width of a projector's 1024 px."""
    return "collapsed" if on() else "auto"


def _follow_toggle() -> None:
    if st.session_state[SWITCH]:
        st.query_params[address.VIEW] = address.PRESENTATION
    else:
        st.query_params.pop(address.VIEW, None)


def toggle() -> tuple[bool, int]:
    """The view's switch (written to the address) and, in the view, how many charts a
    row; returns both."""
    left, right = st.columns([3, 2], vertical_alignment="center")
    presenting = left.toggle(
        "Presentation view",
        value=on(),
        key=SWITCH,
        on_change=_follow_toggle,
        help="For a projector: the charts first and large, each run's card a line. "
        "The address keeps it: share or bookmark it.",
    )
    if not presenting:
        return False, 2
    per_row = right.segmented_control(
        "Charts a row", [2, 3], default=st.session_state.get(PER_ROW, 2), key=f"{PER_ROW}:pick"
    )
    st.session_state[PER_ROW] = per_row or st.session_state.get(PER_ROW, 2)
    return True, st.session_state[PER_ROW]


def for_projector(
    figures: dict[str, go.Figure], per_row: int, *, one_legend: bool = False
) -> dict[str, go.Figure]:
    """`figures` in projector type, for rows of `per_row`: larger fonts and charts, every
    axis included, each title wrapped to its chart's width (Plotly clips a long one), and
    one height for all, so that the charts of a row stay level; without their legends
    when the view has `one_legend` (see `legend_figure`)."""
    titles = {
        key: textwrap.wrap(figure.layout.title.text or "", TITLE_CHARACTERS[per_row])
        for key, figure in figures.items()
    }
    most = max((len(lines) for lines in titles.values()), default=1)
    tallest = max((figure.layout.height or 0 for figure in figures.values()), default=0)
    height = max(tallest, HEIGHT) + TITLE_LINE * (most - 1)
    for key, figure in figures.items():
        _projected(figure, titles[key], height, most)
        if one_legend:
            figure.update_layout(showlegend=False)
    return figures


def legend_figure(legend: ViewLegend) -> go.Figure:
    """The view's one legend, as a figure that is a legend alone, in projector type: each
    run by its colour, then each series by its line (in a neutral grey: the colours are
    the runs'), and, where charts draw layers, each layer in its shade of that grey, and
    how shades read. Plotly draws it as it draws the charts'
    legends, labels as text (escaped, as the charts' trace names hold them:
    `core.charts.traces.scatter`); `ui/live_chart.js` sizes a figure marked
    `LEGEND_ONLY` to its legend's height."""
    figure = go.Figure()
    for label, colour in legend.runs.items():
        figure.add_scatter(
            x=[None], y=[None], name=label, mode="markers",
            marker={"symbol": "square", "size": 14, "color": colour},
        )  # fmt: skip
    layers = [style for style in legend.styles if style.layer]
    shades = {  # the layers' shades of a grey: the runs' colours are the runs'
        style.name: layer_style(NEUTRAL, j, len(layers))[0] for j, style in enumerate(layers)
    }
    for style in legend.styles:
        mode = "+".join(
            part for part, drawn in (("lines", style.line), ("markers", style.markers)) if drawn
        )
        colour = shades.get(style.name) or style.colour or NEUTRAL
        figure.add_scatter(
            x=[None], y=[None], name=style.name, mode=mode,
            line={"color": colour, "dash": style.dash, "width": 3},
            marker={"color": colour, "size": 8},
        )  # fmt: skip
    if legend.layers:  # an entry of words alone
        figure.add_scatter(
            x=[None], y=[None], name=LAYERS_SAID, mode="lines", line={"color": "rgba(0,0,0,0)"}
        )
    hidden = {"visible": False, "fixedrange": True}
    figure.update_layout(
        meta=LEGEND_ONLY,
        height=LEGEND_SIZE * 4,  # until the browser measures the legend
        margin={"l": 0, "r": 0, "t": 0, "b": 0},
        xaxis=hidden,
        yaxis=hidden,
        showlegend=True,
        legend={
            "orientation": "h",
            "x": 0,
            "y": 1,
            "yanchor": "top",
            "font": {"size": LEGEND_SIZE + 2},
            "maxheight": 1,  # the whole figure's height: no scroll bar once fitted
            "itemclick": False,
            "itemdoubleclick": False,
        },
    )
    return figure


def _projected(figure: go.Figure, title: list[str], height: int, most: int) -> None:
    # From the top down, in a margin as tall as the longest title of the row. Plotly
    # centres a title in the margin (a third line reached over the plot), and anchored at
    # its top it still raises a title of n lines by half of the n - 1 below the first.
    raised = TITLE_LINE * (len(title) - 1) / 2
    figure.update_layout(
        height=height,
        title={
            "text": "<br>".join(title),
            "yref": "container",
            "y": 1 - (TITLE_TOP + raised) / height,
            "yanchor": "top",
        },
        margin_t=TITLE_LINE * most + 2 * TITLE_TOP,
        title_font_size=TITLE_SIZE,
        legend_font_size=LEGEND_SIZE,
        hoverlabel_font_size=TICK_SIZE,
    )
    figure.update_xaxes(tickfont_size=TICK_SIZE, title_font_size=AXIS_TITLE_SIZE)
    figure.update_yaxes(tickfont_size=TICK_SIZE, title_font_size=AXIS_TITLE_SIZE)
    figure.update_annotations(font_size=TICK_SIZE)


def cards(engine: Runs, listed: Mapping[str, RunStatus], run_ids: list[str]) -> None:
    """A line a run, side by side: its name, status and progress, refreshed while any
    trains."""
    active = any(listed[run_id].active for run_id in run_ids)

    @st.fragment(run_every=state.refresh_interval(active, state.PROGRESS_REFRESH_SECONDS))
    def lines() -> None:
        for column, run_id in zip(st.columns(len(run_ids)), run_ids, strict=True):
            run = engine.status(run_id)
            column.markdown(f"**{escape_markdown(run.name)}** · {texts.badge(run.status)}")
            loading = engine.loading() if run.status == "queued" else None
            column.progress(min(run.progress, 1.0), text=texts.progress(run, loading))

    lines()
