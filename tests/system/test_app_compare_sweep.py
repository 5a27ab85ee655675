"""The Compare and Sweep pages (streamlit.testing.v1.AppTest): what the tables and the
parallel coordinates show, sampler seeds, live study summaries, cloning a trial, and that
neither page imports TensorFlow."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from core.charts.sweep_analysis import NO_TRIAL_YET
from core.engine import RunConfig
from core.engine.client import EngineClient
from core.sweep import Dimension, SearchSpace, Sweep
from tests.apptest import (
    ROOT,
    SHORT,
    fill_sweep_form,
    finished_run,
    live_specs,
    page,
    written_group,
    written_run,
)
from tests.lean import NO_INSTRUMENTS
from tests.waiting import scaled, wait_for
from ui import nav

# Trials of about a second: 8×8 digits, validated every 11 steps.
TRIAL = RunConfig(
    dataset="digits",
    model="mlp",
    optimizer="sgd",
    hyperparameters={"learning_rate": 0.1},
    max_steps=22,
    epochs=1,
    val_every=11,
    **NO_INSTRUMENTS,
)
LR = SearchSpace((Dimension("learning_rate", 1e-3, 1.0, log=True),))


@pytest.fixture
def sweeps(lab: EngineClient) -> Iterator[Callable[..., Sweep]]:
    """Starts sweeps of `lab` as the Sweep page does (handed to the engine, which drives
    them; kept in `ui.state.sweeps()`), and stops whatever still runs at the end."""
    from ui import state

    def start(base: RunConfig = TRIAL, **options: Any) -> Sweep:
        sweep = Sweep(lab, base, LR, sampler="random", **options)
        sweep.submit()
        state.sweeps()[sweep.study_name] = sweep
        return sweep

    yield start
    for sweep in state.sweeps().values():
        sweep.stop()
        sweep.wait(scaled(60))


@pytest.fixture
def ticking_tables(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The keys of the tables a page draws inside a fragment that reruns on a timer
    (`run_every`): what refreshes by itself in the browser, which AppTest does not do."""
    keys: list[str] = []
    inside = [False]
    real_fragment, real_dataframe = st.fragment, st.dataframe

    def fragment(func: Callable | None = None, *, run_every: Any = None, **kwargs: Any) -> Any:
        def decorate(body: Callable) -> Callable:
            @functools.wraps(body)
            def run(*args: Any, **kw: Any) -> Any:
                outer, inside[0] = inside[0], inside[0] or run_every is not None
                try:
                    return body(*args, **kw)
                finally:
                    inside[0] = outer

            return real_fragment(run, run_every=run_every, **kwargs)

        return decorate if func is None else decorate(func)

    def dataframe(*args: Any, **kwargs: Any) -> Any:
        if inside[0]:
            keys.append(kwargs.get("key"))
        return real_dataframe(*args, **kwargs)

    monkeypatch.setattr(st, "fragment", fragment)
    monkeypatch.setattr(st, "dataframe", dataframe)
    return keys


def in_order(node: Any) -> Iterator[Any]:
    """The page's elements as drawn, top to bottom (depth first through its columns)."""
    yield node
    children = getattr(node, "children", {})
    for index in sorted(children):
        yield from in_order(children[index])


def as_shown(text: str) -> str:
    """Markdown as the page shows it: without the escapes that keep names literal."""
    return text.replace("\\", "")


def place(at: AppTest, element: Any) -> int:
    """Where `element` is drawn on the page, counted in elements from the top."""
    return next(i for i, node in enumerate(in_order(at.main)) if node is element)


def column_formats(table: Any) -> dict[str, str | None]:
    """Each configured column of an AppTest dataframe, with its number format."""
    config = json.loads(table.proto.columns)
    return {k: v.get("type_config", {}).get("format") for k, v in config.items()}


# Compare ------------------------------------------------------------------------------


def test_compare_shows_the_optimizer_and_every_knob_that_differs(lab: EngineClient) -> None:
    knobs = SHORT["hyperparameters"]
    ids = [
        finished_run(lab),
        finished_run(lab, hyperparameters={**knobs, "learning_rate": 0.05}),
        finished_run(lab, optimizer="momentum", hyperparameters={**knobs, "nesterov": True}),
    ]
    at = page(nav.COMPARE)
    at.session_state["compare"] = ids
    at.run()
    assert not at.exception

    table = at.dataframe[0]
    columns = table.value.columns.tolist()
    assert {"run", "optimizer", "learning_rate", "nesterov", "val_accuracy"} <= set(columns)
    assert not {"radius", "batch_size", "model", "layer_rules"} & set(columns)  # all alike
    formats = column_formats(table)
    assert formats["val_accuracy"] == "%.3f" and formats["loss"] == "%.4g"
    assert formats["steps"] == "%d" and formats["learning_rate"] == "%.4g"
    assert "radius 20" in at.caption[0].value  # what they share is said once
    # Each ran to its end and saved a checkpoint there: its model can be downloaded.
    assert len(at.selectbox(key="compare:model").options) == 3
    assert at.radio(key=f"model:checkpoint:{ids[0]}").options[0].startswith("last · step")
    (button,) = [b for b in at.get("download_button") if b.proto.label == "Download .keras"]
    assert button.proto.HasField("deferred_file_id")  # written at the click, not per refresh

    (parcoords,) = json.loads(at.get("plotly_chart")[0].proto.spec)["data"]
    axes = {axis["label"]: axis for axis in parcoords["dimensions"]}
    assert {"optimizer", "learning_rate", "nesterov", "val_accuracy"} <= set(axes)
    assert set(axes["optimizer"]["ticktext"]) == {"sgd", "momentum"}  # a categorical axis
    assert "radius" not in axes


def test_compare_picks_the_newest_two_groups_and_says_which_is_better_first(
    lab: EngineClient,
) -> None:
    written_run(lab.store, "solo", "solo")
    written_group(lab.store, "old", (0.4, 0.5))
    written_group(lab.store, "fast", (0.30, 0.31, 0.29))
    written_group(lab.store, "slow", (0.60, 0.62, 0.58))
    at = page(nav.COMPARE).run()
    assert not at.exception
    # The newest groups, not the newest runs of any group: nothing else is mixed in.
    assert at.multiselect(key="compare_groups").value == ["g-slow", "g-fast"]
    assert at.multiselect(key="compare_runs").value == []
    assert at.query_params["groups"] == "g-slow,g-fast" and "runs" not in at.query_params
    table = at.dataframe[0].value
    assert sorted(table["id"]) == [f"{g}-{s}" for g in ("fast", "slow") for s in range(3)]

    # The verdict comes before the table and the charts, its p-values explained.
    at.selectbox(key="compare:metric").select("val_loss").run()
    (sentence,) = [m for m in at.markdown if "over 3 and 3 seeds" in m.value]
    assert as_shown(sentence.value).startswith("slow's final val_loss is ")
    assert at.subheader[0].value == "Is A better than B?"
    assert place(at, sentence) < place(at, at.dataframe[0])
    assert "p = 0.1 by a permutation test" in as_shown(sentence.value)  # as low as 3 and 3 go
    (note,) = [as_shown(c.value) for c in at.caption if "permutation test assumes" in c.value]
    assert "counts the 20 ways to split the 6 runs" in note
    assert note.endswith("with 3 and 3 seeds it can give no p below 0.1.")
    # Classifiers only: no column of MAEs that none of them has.
    assert "best_val_mae" not in table.columns and "best_val_accuracy" in table.columns

    # Three groups: A and B are any two of them.
    at.multiselect(key="compare_groups").select("g-old").run()
    assert at.selectbox(key="compare:a").options[-1].startswith("old ×2")
    at.selectbox(key="compare:b").select("g-old").run()
    (note,) = [as_shown(c.value) for c in at.caption if "permutation test assumes" in c.value]
    assert note.endswith("with 3 and 2 seeds it can give no p below 0.1.")  # 1 of 10
    at.multiselect(key="compare_groups").unselect("g-slow").run()  # A's group
    assert not at.exception
    assert {at.selectbox(key="compare:a").value, at.selectbox(key="compare:b").value} == {
        "g-fast",
        "g-old",
    }


def test_compare_shows_runs_handed_over_as_their_groups_and_single_runs(
    lab: EngineClient,
) -> None:
    fast = written_group(lab.store, "fast", (0.30, 0.31, 0.29))
    slow = written_group(lab.store, "slow", (0.60, 0.62, 0.58))
    mae = written_run(lab.store, "regression", "regression", final={"best_val_mae": 0.2})
    at = page(nav.COMPARE)
    at.session_state["compare"] = [*fast, slow[0], mae]  # as Home's Compare button hands them
    at.run()
    assert not at.exception
    assert at.multiselect(key="compare_groups").value == ["g-fast"]
    assert at.multiselect(key="compare_runs").value == [slow[0], mae]
    assert {"best_val_mae", "best_val_accuracy"} <= set(at.dataframe[0].value.columns)
    # One group: no verdict first, but word at the end of how to have one.
    assert at.subheader[-1].value == "Is A better than B?"
    assert not [box for box in at.selectbox if box.key == "compare:a"]
    assert "Pick two groups of repeats above" in at.caption[-1].value

    # A link of runs only (as shared before groups) shows those runs and no group.
    shared = page(nav.COMPARE)
    shared.query_params["runs"] = f"{fast[0]},{mae}"
    shared.run()
    assert not shared.exception
    assert shared.multiselect(key="compare_groups").value == []
    assert shared.multiselect(key="compare_runs").value == [fast[0], mae]


# Sweep --------------------------------------------------------------------------------


def start_from_the_form(at: AppTest, seed: int | None) -> None:
    fill_sweep_form(at, n_trials=1)
    at.number_input(key="sweep:seed").set_value(seed).run()
    at.button(key="sweep:start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    # Folded once it started, under a new key (a new expander: the browser's open one is
    # not told to close): its progress, drawn below the form, comes into view.
    (form,) = [e for e in at.expander if e.label == "New sweep"]
    assert not form.proto.expanded and not form.proto.default_expanded


@pytest.mark.usefixtures("sweeps")  # which stops the sweeps the form starts
def test_every_sweep_gets_a_fresh_seed_unless_given_one() -> None:
    from ui import state

    at = page(nav.SWEEP).run()
    assert at.number_input(key="sweep:seed").value is None  # empty: random
    for seed in (None, None, 1234):
        start_from_the_form(at, seed)
    first, second, given = (sweep.plan.seed for sweep in state.sweeps().values())
    assert first != second and given == 1234
    assert any("seed 1234" in caption.value for caption in at.caption)  # shown, to replay


def test_the_studies_and_their_trials_refresh_while_a_sweep_runs(
    lab: EngineClient,
    sweeps: Callable[..., Sweep],
    ticking_tables: list[str],
    capfd: pytest.CaptureFixture[str],
) -> None:
    sweep = sweeps(TRIAL.replace(max_steps=20_000, epochs=1000), n_trials=1)
    wait_for(lambda: sweep.study is not None and sweep.results(), 60, "its first trial")
    capfd.readouterr()
    at = page(nav.SWEEP).run()
    assert not at.exception
    # Before a trial completes, the analysis's charts say so, and Optuna is not asked to
    # draw them: it logged "There are no complete trials" at every refresh of the page.
    assert "complete trials" not in capfd.readouterr().err
    assert NO_TRIAL_YET in str(live_specs(at))
    (studies,) = [t.value for t in at.dataframe if "sweep" in t.value.columns]
    assert studies["sweep"].tolist() == [sweep.study_name]
    assert "sweep:studies:None" in ticking_tables  # the list of studies, with its counts
    assert f"sweep:trials:{sweep.study_name}" in ticking_tables

    sweep.stop()
    assert sweep.wait(scaled(60)).state == "stopped"
    ticking_tables.clear()
    at.run()
    assert not at.exception and ticking_tables == []  # nothing runs: no refreshing


def test_a_picked_trial_clones_into_train(lab: EngineClient, sweeps: Callable[..., Sweep]) -> None:
    sweep = sweeps(n_trials=2)
    assert sweep.wait(scaled(120)).state == "done"
    trial = sweep.results()[1]
    run = lab.status(trial.run_id)

    at = page(nav.SWEEP).run()
    assert at.button(key="sweep:clone").disabled  # until a trial is picked
    at.session_state[f"sweep:trials:{sweep.study_name}"] = {
        "selection": {"rows": [1], "columns": [], "cells": []}
    }
    at.run()
    at.button(key="sweep:clone").click().run()
    assert not at.exception
    assert at.title[0].value.endswith("Train")
    assert at.text_input(key="run:name").value == run.name
    learning_rate = run.config["hyperparameters"]["learning_rate"]
    assert at.text_input(key="knob:sgd:learning_rate").value == f"{learning_rate:g}"


def test_a_stopped_sweep_resumes_from_its_page(
    lab: EngineClient, sweeps: Callable[..., Sweep]
) -> None:
    from ui import state

    sweep = sweeps(TRIAL.replace(max_steps=20_000, epochs=1000), n_trials=2, parallel=1)
    wait_for(lambda: [r for r in sweep.results() if r.step])  # its first run trains
    sweep.stop()
    status = sweep.wait(scaled(60))
    assert status.state == "stopped" and status.to_run == 2 and status.resumable

    at = page(nav.SWEEP).run()
    assert not at.exception
    assert not [b for b in at.button if b.key == "sweep:stop"]  # Resume in its place
    at.button(key="sweep:resume").click().run()
    assert not at.exception
    resumed = state.sweeps()[sweep.study_name]
    assert resumed is not sweep and resumed.active
    # The stopped trial's values run again first, as a new trial with a run of its own.
    wait_for(lambda: len(resumed.results()) == 2 and resumed.results()[1].run_id)
    first, retry = resumed.results()
    assert retry.params == first.params and retry.run_id != first.run_id
    resumed.stop()
    assert resumed.wait(scaled(60)).state == "stopped"


def test_a_finished_sweep_offers_no_resume(lab: EngineClient, sweeps: Callable[..., Sweep]) -> None:
    status = sweeps(n_trials=1).wait(scaled(120))
    assert status.state == "done" and status.to_run == 0 and not status.resumable
    at = page(nav.SWEEP).run()
    assert at.button(key="sweep:stop").disabled
    assert not [b for b in at.button if b.key == "sweep:resume"]


# Never TensorFlow ---------------------------------------------------------------------

RENDER_PAGES = """
import sys
from tests.apptest import page
from ui import nav

for shown in (nav.COMPARE, nav.SWEEP):
    at = page(shown)
    at.session_state["compare"] = sys.argv[1:]  # the runs to compare
    at.run()
    assert not at.exception, (shown.title, [e.value for e in at.exception])
    # Drawn with data: the parallel coordinates (live on Sweep, redrawn as trials end).
    assert at.get("plotly_chart") or at.get("bidi_component"), shown.title
print(sorted({"tensorflow", "keras"} & set(sys.modules)))
"""


def test_compare_and_sweep_pages_never_import_tensorflow(
    app_store: Path, lab: EngineClient, sweeps: Callable[..., Sweep]
) -> None:
    ids = [finished_run(lab, seed=seed) for seed in (0, 1)]
    assert sweeps(n_trials=1).wait(scaled(120)).state == "done"
    # Another process, as the dashboard's: it finds this process's engine through the store.
    env = {**os.environ, "OPTLAB_STORE": str(app_store)}
    out = subprocess.run(
        [sys.executable, "-c", RENDER_PAGES, *ids],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=scaled(300),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_sweep_page_lists_studies_oldest_first(
    lab: EngineClient, sweeps: Callable[..., Sweep]
) -> None:
    first = sweeps(n_trials=1)
    first.wait(scaled(120))
    second = sweeps(n_trials=1)
    second.wait(scaled(120))
    at = page(nav.SWEEP).run()
    (studies,) = [t.value for t in at.dataframe if "sweep" in t.value.columns]
    assert studies["sweep"].tolist() == [first.study_name, second.study_name]
    assert studies["done"].tolist() == [1, 1]


def test_no_field_of_the_sweep_page_names_a_server_path_or_database(lab) -> None:
    """Studies live in the lab's store: the page has no storage field, which accepted
    `sqlite:////any/path` and wrote Optuna's tables into any file on the server."""
    at = page(nav.SWEEP).run()
    assert not at.exception
    labels = [widget.label.lower() for widget in at.text_input]
    assert not [label for label in labels if "storage" in label or "url" in label], labels
