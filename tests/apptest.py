"""The app's pages under `streamlit.testing.v1.AppTest`, and short runs to show on them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from streamlit.testing.v1 import AppTest

from core.engine import RunConfig

ROOT = Path(__file__).resolve().parents[1]
# A run of about a second: 12 MLP steps on the 8×8 digits.
SHORT = {
    "dataset": "digits",
    "model": "mlp",
    "optimizer": "sgd",
    "max_steps": 12,
    "log_every": 2,
    "hyperparameters": {"learning_rate": 0.1, "radius": 20.0},
}


def live_specs(at: AppTest) -> list[str]:
    """The Plotly JSON of each live chart (`ui.live_chart`) the page drew, in order."""
    return [json.loads(chart.proto.json)["figure"] for chart in at.get("bidi_component")]


def page(name: str) -> AppTest:
    """A page of the app, run as Streamlit runs it: app.py is the main script, so page
    paths (`st.switch_page("pages/...")`) resolve as they do in the server."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    return at if name == "app.py" else at.switch_page(name)


def finished_run(engine: Any, **changes: Any) -> str:
    """A `SHORT` run (with `changes`) started through `engine`, once it has ended."""
    run_id = engine.start(RunConfig.from_dict({**SHORT, **changes}))
    engine.wait(run_id, 60)
    return run_id


def fill_sweep_form(at: AppTest, n_trials: int) -> None:
    """The Sweep page's form set for a short random sweep of sgd on an MLP and digits."""
    at.selectbox(key="sweep:optimizer").select("sgd").run()
    at.selectbox(key="sweep:model").select("mlp").run()
    at.selectbox(key="sweep:dataset").select("digits").run()
    at.number_input(key="sweep:epochs").set_value(1).run()
    at.number_input(key="sweep:n_trials").set_value(n_trials).run()
    at.radio(key="sweep:sampler").set_value("random").run()
