"""The app's pages under `streamlit.testing.v1.AppTest`, and short runs to show on them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from streamlit.runtime.pages_manager import PagesManager
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

from core.engine import RunConfig
from core.store import Store
from core.store.metrics import Block
from tests.waiting import scaled
from ui import nav

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


def page(shown: nav.Page = nav.HOME) -> AppTest:
    """Page `shown` of the app (`ui.nav.PAGES`), run as Streamlit runs it: app.py is the
    main script, so a page's file (`st.switch_page(nav.LIVE.file)`) resolves as it does in
    the server."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=scaled(60))
    if shown is not nav.HOME:
        # As a browser asks for the page its address names (`st.Page` hashes the address).
        # Not `at.switch_page(shown.file)`: before a first run it knows no `st.navigation`
        # and names a page by its file ("live"), not by its address ("Live"); after a run
        # it matches files, so `at.switch_page(nav.COMPARE.file)` opens Compare.
        at._page_hash = calc_hash(shown.url_path)
    # Home, the default, is asked for by nothing: a later run then stays on the page that
    # a switch in the page went to, as a browser's tab does.
    return at


def finished_run(engine: Any, **changes: Any) -> str:
    """A `SHORT` run (with `changes`) started through `engine`, once it has ended."""
    run_id = engine.start(RunConfig.from_dict({**SHORT, **changes}))
    engine.wait(run_id, scaled(60))
    return run_id


def fill_sweep_form(at: AppTest, n_trials: int) -> None:
    """The Sweep page's form set for a short random sweep of sgd on an MLP and digits."""
    at.selectbox(key="sweep:optimizer").select("sgd").run()
    at.selectbox(key="sweep:model").select("mlp").run()
    at.selectbox(key="sweep:dataset").select("digits").run()
    at.text_input(key="sweep:epochs").input("1").run()
    at.number_input(key="sweep:n_trials").set_value(n_trials).run()
    at.radio(key="sweep:sampler").set_value("random").run()


def trials_shown(at: AppTest) -> list[Any]:
    """The Sweep page's tables of trials."""
    return [d.value for d in at.dataframe if "trial" in d.value.columns]


def trials_shown_complete(at: AppTest) -> bool:
    """Runs the Sweep page `at` again: whether it shows every trial of its sweep complete,
    as it does once the sweep's driver has told the study (within a poll of a run's end)."""
    at.run()
    assert not at.exception
    tables = trials_shown(at)
    return bool(tables) and set(tables[0]["state"]) == {"COMPLETE"}


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
