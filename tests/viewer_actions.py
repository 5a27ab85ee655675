"""Every path by which the dashboard acts, called as its page calls it, for the tests that
hand each one a viewer's session (tests/system/test_presenter_roles.py); and every page
load, which must write nothing either.

A path takes the session's `Runs` (`ui.state.engine()`) and the id of an ended run; it
does what the page's button, slider, form or uploader does.
A new action on a page gets a line here; a new page gets its line in `ui.nav.PAGES`.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pandas as pd
import streamlit as st

from core import optimizers
from core.demo_race import DEFAULT_LENGTH, race_configs
from core.engine import run_fields
from core.engine.api import Runs
from core.recipes import RECIPES
from core.recipes import start as start_recipe
from ui import live_panel, nav, runs_table, sweep_actions, sweep_form, train_form

Path = Callable[[Runs, str], Any]


#: The buttons that act: no page shows one to a viewer (the presenter sees those of Home
#: and Live).
CONTROLS = frozenset(
    {
        "Add tags",
        "Apply",
        "Clone",
        "Clone into Train",
        "Compute the landscape",
        "Delete",
        "Download a model",
        "Find a learning rate",
        "Fork",
        "Model",
        "Pause",
        "Resume",
        "Run it",
        "Start sweep",
        "Start the demo race",
        "Start training",
        "Stop",
        "Tag",
    }
)


def train(range_test: bool) -> Path:
    """Train's Start training (or Find a learning rate), with the form at its defaults."""

    def submit(engine: Runs, run_id: str) -> None:
        train_form.seed_widgets(None)
        train_form.seed_knobs(
            optimizers.get_spec(st.session_state[train_form.run_key("optimizer")])
        )
        train_form.submit(range_test)

    return submit


def upload(engine: Runs, run_id: str) -> None:
    """Train's Your own data: a CSV, uploaded."""
    csv = b"a,b,label\n" + b"".join(b"%d,%d,%d\n" % (i, i + 1, i % 2) for i in range(20))
    st.session_state[train_form.UPLOAD] = SimpleNamespace(name="mine.csv", getvalue=lambda: csv)
    train_form.upload()


def steer(verb: str, **knobs: float) -> Path:
    """A Live button (Pause, Resume, Stop) or the knob sliders' Apply."""

    def click(engine: Runs, run_id: str) -> None:
        action = getattr(engine, verb)
        live_panel.send(engine, lambda run: action(run, **knobs), run_id, "done")

    return click


def start_sweep(engine: Runs, run_id: str) -> None:
    settings = {"n_trials": 1, "sampler": "random", "parallel": 1, "repeats": 1}
    frame = pd.DataFrame(sweep_form.dimension_rows("sgd"))
    sweep_form.start(engine, run_fields(), frame, {**settings, "pruning": False, "seed": 0})


def status(engine: Runs, run_id: str) -> list[Any]:
    return [engine.status(run_id)]


PATHS: dict[str, Path] = {
    "Home: Start the demo race": lambda e, r: e.start_all(race_configs(DEFAULT_LENGTH, 1)),
    "Home: Resume": lambda e, r: runs_table.resume_runs(e, status(e, r)),
    "Home: Tag": lambda e, r: runs_table.tag_runs(e, status(e, r), "mine"),
    "Home: Delete": lambda e, r: runs_table.delete_runs(e, status(e, r)),
    "Train: Start training": train(range_test=False),
    "Train: Find a learning rate": train(range_test=True),
    "Train: upload": upload,
    "Live: Pause": steer("pause"),
    "Live: Resume": steer("resume"),
    "Live: Stop": steer("stop"),
    "Live: Apply knobs": steer("update", learning_rate=0.5),
    "Live: Resume from its checkpoint": lambda e, r: live_panel.resume(e, r, 10),
    "Live: Fork": lambda e, r: e.fork(r, 10, learning_rate=0.5),
    "Live: Compute the landscape": lambda e, r: e.ask_landscape(r, 10),
    "Live/Compare: Download .keras": lambda e, r: e.model_file(r, "10"),
    "Live: publish the view the room follows": lambda e, r: e.publish_view(None),
    "Recipes: Run it": lambda e, r: start_recipe(next(iter(RECIPES.values())), e),
    "Sweep: Start sweep": start_sweep,
    "Sweep: Resume the sweep": lambda e, r: sweep_actions.resume(e, "a-sweep"),
    "Sweep: Stop the sweep": lambda e, r: sweep_actions.stop(SimpleNamespace(stop=None)),
}


def page_loads(run_id: str) -> dict[nav.Page, dict[str, str]]:
    """Every page of the app (`ui.nav.PAGES`) with the address parameters a viewer opens
    it with: Live and Compare on the ended run `run_id`; the Sweep page opens the newest
    study by itself."""
    return {page: {"runs": run_id} if page in (nav.LIVE, nav.COMPARE) else {} for page in nav.PAGES}
