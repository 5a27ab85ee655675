"""`ui.live_chart`: Plotly's JavaScript served beside the app, and the figure it draws."""

from __future__ import annotations

import json
from pathlib import Path

import plotly
import plotly.graph_objects as go
import plotly.offline

from ui import live_chart


def test_plotly_js_is_copied_once_where_streamlit_serves_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(live_chart, "STATIC", tmp_path / "static")
    url = live_chart.served_plotly()
    served = tmp_path / "static" / live_chart.PLOTLY_JS
    source = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    assert url == f"app/static/{served.name}"
    assert served.read_bytes() == source.read_bytes()
    # The name carries plotly.js's version: an upgrade is a new file, not a stale cache.
    assert plotly.offline.get_plotlyjs_version() in served.name
    served.write_text("kept")  # there already: not copied again
    assert live_chart.served_plotly() == url and served.read_text() == "kept"
    assert [p.name for p in served.parent.iterdir()] == [served.name]  # no partial left


def test_the_figure_goes_out_in_streamlits_dark_theme(monkeypatch) -> None:
    mounted = []
    monkeypatch.setattr(live_chart, "_mount", lambda **kwargs: mounted.append(kwargs))
    monkeypatch.setattr(live_chart, "served_plotly", lambda: "app/static/p.js")
    figure = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]), layout={"uirevision": "loss"})
    live_chart.live_chart(figure, key="chart:loss")
    (call,) = mounted
    assert call["key"] == "chart:loss" and call["data"]["plotly"] == "app/static/p.js"
    sent = json.loads(call["data"]["figure"])
    assert sent["layout"]["uirevision"] == "loss"
    assert sent["layout"]["template"]["layout"]["font"]["color"] == live_chart.TEXT
    assert sent["layout"]["template"]["layout"]["paper_bgcolor"] == "rgba(0, 0, 0, 0)"
