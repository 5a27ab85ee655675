"""The Playground page (issue 54, item 1) under AppTest: a race draws one path per racer
(several optimizers, or one at several values of a knob) from the page server's worker,
bad input is named under its field and computes nothing, the page server never imports
Keras, and a room's viewer follows the presenter's surface, knobs, step and plays."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from core.presenter import KEY_VARIABLE
from tests.apptest import page
from tests.imports import heavy_modules_after
from ui import nav, playground_paths
from ui.playground_form import (
    OPTIMIZER,
    OPTIMIZERS,
    PLAYING,
    RACE,
    STEP,
    SURFACE,
    VALUES,
    VALUES_RACE,
    VARY,
    X,
    knob_key,
)

KEY = "the-presenters-key-0123456789"


def drawn(at: AppTest) -> dict[str, Any]:
    """What the page gave its chart (`ui.playground_chart`)."""
    (chart,) = at.get("bidi_component")
    return json.loads(chart.proto.json)


def figure(at: AppTest) -> dict[str, Any]:
    """The race the page drew."""
    return json.loads(drawn(at)["figure"])


def paths(at: AppTest) -> dict[str, Any]:
    """Each racer's path trace, by its label."""
    return {
        trace["name"]: trace
        for trace in figure(at)["data"]
        if trace.get("meta") == "animated" and ":" not in trace["name"]
    }


def errors(at: AppTest) -> list[str]:
    return [error.value for error in at.error]


def test_a_race_draws_one_path_per_optimizer_and_per_value(app_store: Path) -> None:
    at = page(nav.PLAYGROUND).run()
    assert not at.exception and not errors(at)
    assert list(paths(at)) == ["sgd", "momentum", "adam"]
    at.multiselect(key=OPTIMIZERS).set_value(["adam", "projected_gd"]).run()
    assert list(paths(at)) == ["adam", "projected_gd"]
    assert len(figure(at)["layout"]["shapes"]) == 1  # projected_gd's ball
    at.selectbox(key=RACE).select(VALUES_RACE).run()
    at.selectbox(key=OPTIMIZER).select("momentum").run()
    at.selectbox(key=VARY).select("momentum").run()
    at.text_input(key=VALUES).input("0, 0.5, 0.9").run()
    drawn = paths(at)
    assert list(drawn) == ["momentum = 0", "momentum = 0.5", "momentum = 0.9"]
    ends = {label: (trace["x"], trace["y"]) for label, trace in drawn.items()}
    assert len({json.dumps(end) for end in ends.values()}) == 3  # three paths, not one
    assert [markdown.value for markdown in at.markdown if "ends at" in markdown.value]


@pytest.mark.parametrize(
    ("key", "typed", "field"),
    [
        (knob_key("sgd", "learning_rate"), "-0.1", "learning\\_rate"),
        (knob_key("momentum", "learning_rate"), "nan", "learning\\_rate"),
        (knob_key("adam", "radius"), "0", "radius"),
        (X, "nan", "start"),
        (X, "1e9", "start"),
    ],
)
def test_bad_input_names_its_field_and_computes_nothing(
    app_store: Path, key: str, typed: str, field: str
) -> None:
    at = page(nav.PLAYGROUND).run()
    answered = playground_paths.worker().answered
    at.text_input(key=key).input(typed).run()
    assert not at.exception
    (error,) = errors(at)
    assert error.startswith(f"**{field}**:")
    assert not at.get("bidi_component")  # nothing drawn
    assert playground_paths.worker().answered == answered  # nor computed


def test_a_bad_value_of_a_race_of_values_names_the_values(app_store: Path) -> None:
    at = page(nav.PLAYGROUND).run()
    at.selectbox(key=RACE).select(VALUES_RACE).run()
    at.text_input(key=VALUES).input("0.01, -1").run()
    (error,) = errors(at)
    assert error.startswith("**values**: learning\\_rate \\= \\-1\\: must be in")
    assert not at.get("bidi_component")


# The page in another interpreter, as the page server runs it: its paths come from the
# worker's process; itself it imports neither TensorFlow nor Keras.
PAGE_IN_A_SERVER = """
from tests.apptest import page
from ui import nav
at = page(nav.PLAYGROUND).run()
assert not at.exception, at.exception
assert at.get("bidi_component"), [e.value for e in at.error]  # drawn: the worker answered
"""


def test_the_page_server_never_imports_keras(app_store: Path) -> None:
    assert heavy_modules_after(PAGE_IN_A_SERVER) == []  # OPTLAB_STORE: this test's store


def room(key: str | None = None) -> AppTest:
    """A session on the Playground (the presenter's when `key` is given)."""
    at = page(nav.PLAYGROUND)
    if key is not None:
        at.session_state["presenter:key"] = key
    return at.run()


def test_a_viewer_follows_the_presenters_surface_knobs_and_step_until_it_picks(
    app_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    presenter = room(KEY)  # its worker loads TensorFlow: longer than a view beats unseen
    viewer = room()
    presenter.selectbox(key=SURFACE).select("beale").run()
    presenter.text_input(key=knob_key("sgd", "learning_rate")).input("0.002").run()
    presenter.session_state[STEP] = 100  # as its chart reports where its slider ended
    presenter.session_state[PLAYING] = {"from": 40, "at": 1796640000000}  # a play started
    presenter.run()
    viewer.run()
    assert drawn(viewer)["play"] == {"from": 40, "at": 1796640000000}  # its chart plays it
    assert not drawn(viewer)["report"] and drawn(presenter)["report"]
    assert viewer.session_state[SURFACE] == "beale"
    assert viewer.text_input(key=knob_key("sgd", "learning_rate")).value == "0.002"
    assert paths(viewer)["sgd"]["x"] == paths(presenter)["sgd"]["x"]
    (slider,) = figure(viewer)["layout"]["sliders"]
    assert slider["steps"][slider["active"]]["label"] == "100"
    assert not [b for b in viewer.button if b.label == "Follow the presenter"]

    viewer.selectbox(key=SURFACE).select("saddle").run()  # its own pick: following ends
    presenter.selectbox(key=SURFACE).select("rosenbrock").run()
    assert viewer.run().session_state[SURFACE] == "saddle"
    (follow,) = [b for b in viewer.button if b.label == "Follow the presenter"]
    follow.click().run()
    assert viewer.session_state[SURFACE] == "rosenbrock"
