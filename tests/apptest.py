"""The app's pages under `streamlit.testing.v1.AppTest`, and short runs to show on them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from streamlit.runtime.pages_manager import PagesManager
from streamlit.testing.v1 import AppTest

from core.engine import RunConfig
from core.store import Store
from core.store.metrics import Block

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


def framed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Has `page`'s pages run inside the frame (app.py: its sidebar, `ui.roles.admit`,
    `ui.address.clean`), as `ui.serve` has the server run them. AppTest resets
    `PagesManager.uses_pages_directory` before each run, and a pages/ folder then runs a
    page switched to bare, its script alone."""
    init = PagesManager.__init__

    def without_pages_directory(manager: PagesManager, *args: Any, **kwargs: Any) -> None:
        init(manager, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    monkeypatch.setattr(PagesManager, "__init__", without_pages_directory)


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
    at.text_input(key="sweep:epochs").input("1").run()
    at.number_input(key="sweep:n_trials").set_value(n_trials).run()
    at.radio(key="sweep:sampler").set_value("random").run()


def written_run(
    store: Store,
    run_id: str,
    name: str,
    *,
    val_loss: float = 0.5,
    final: dict[str, float] | None = None,
    **changes: Any,
) -> str:
    """A completed run written straight into `store`, without training (in a moment): a
    `SHORT` run's config with `changes`, its validation loss falling to `val_loss` over
    three evaluations; its final metrics `final`, else those of a classifier."""
    config = RunConfig.from_dict({**SHORT, "name": name, **changes}).to_dict()
    store.create_run(run_id, name, config, status="running")
    curve = val_loss * np.array([3.0, 2.0, 1.0])
    columns = np.stack([curve, curve, 1 - curve / 4])
    keys = ("loss", "val_loss", "val_accuracy")
    store.append_metrics(run_id, Block(keys, np.array([10, 20, 30]), columns))
    accuracy = 1 - val_loss / 4
    ended = {"best_val_accuracy": accuracy, "val_accuracy": accuracy, "val_loss": val_loss}
    store.finish(run_id, "completed", ended if final is None else final)
    return run_id


def written_group(
    store: Store, name: str, val_losses: tuple[float, ...], **changes: Any
) -> list[str]:
    """A group of repeats `g-NAME` of `written_run`s, one a validation loss, named as
    repeats are (`NAME · seed K`)."""
    return [
        written_run(
            store, f"{name}-{k}", f"{name} · seed {k}", val_loss=v, group=f"g-{name}", **changes
        )
        for k, v in enumerate(val_losses)
    ]
