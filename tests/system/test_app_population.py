"""The Sweep page's Population mode (streamlit.testing.v1.AppTest) on a population written
into the store as its driver writes one: the lineage with its exploit, each member's knob
schedule, the ranking, the best over time, and "Replay the best schedule"."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from core.engine import RunConfig
from core.engine.client import EngineClient
from core.population.lineage import read_population, replay_config
from core.store import KNOB_EVENT, LAUNCH_EVENT, Store
from core.store.metrics import Block
from tests.apptest import SHORT, live_specs, page
from tests.waiting import scaled, wait_for
from ui import nav

PLAN = {
    "population": 3,
    "interval": 10,
    "generations": 3,
    "objective": {"name": "val_accuracy", "metric": "val_accuracy", "direction": "maximize"},
    "space": [{"name": "learning_rate", "low": 0.01, "high": 0.5, "log": True, "choices": []}],
    "quantile": 0.34,
    "perturb": [0.8, 1.2],
    "resample": 0.25,
    "seed": 0,
}


def written_member(
    store: Store,
    run_id: str,
    member: int,
    rate: float,
    accuracies: dict[int, float],
    *,
    status: str = "completed",
    parent: str | None = None,
    forked_at: int | None = None,
) -> None:
    """A run of population `pbt-page` as the driver leaves one: tagged, its launch
    recorded, validated at the steps of `accuracies`; a fork's explore as a knob event at
    its first step."""
    config = RunConfig.from_dict(
        {**SHORT, "max_steps": 30, "val_every": 10, "hyperparameters": {"learning_rate": rate}}
    ).to_dict()
    store.create_run(run_id, f"pbt-page m{member}", config, parent=parent, forked_at=forked_at)
    store.set_tags(run_id, ["population:pbt-page"])
    store.add_event(
        run_id, 0, LAUNCH_EVENT, {"population": "pbt-page", "member": member, "plan": PLAN}
    )
    if forked_at is not None:
        payload = {"name": "learning_rate", "value": rate, "previous": 0.3}
        store.add_event(run_id, forked_at + 1, KNOB_EVENT, payload)
    steps = np.array(sorted(accuracies))
    values = np.array([[accuracies[s] for s in steps]])
    store.append_metrics(run_id, Block(("val_accuracy",), steps, values))
    store.set_progress(run_id, int(steps[-1]))
    store.finish(run_id, status, {"val_accuracy": accuracies[int(steps[-1])]})


def written_population(store: Store) -> None:
    """Three members; at step 10 the worst (m2) copies the best (m0) with a higher rate."""
    written_member(store, "p0", 0, 0.3, {10: 0.8, 20: 0.85, 30: 0.9})
    written_member(store, "p1", 1, 0.1, {10: 0.7, 20: 0.75, 30: 0.8})
    written_member(store, "p2", 2, 0.01, {10: 0.5}, status="stopped")
    written_member(store, "p2f", 2, 0.36, {20: 0.86, 30: 0.91}, parent="p0", forked_at=10)


def figures(at: Any) -> dict[str, dict]:
    """The page's live charts by their `uirevision` (see core.charts.population)."""
    drawn = [json.loads(spec) for spec in live_specs(at)]
    return {figure["layout"]["uirevision"]: figure for figure in drawn}


def test_the_population_mode_draws_the_lineage_schedules_ranking_and_replays(
    lab: EngineClient,
) -> None:
    written_population(lab.store)
    at = page(nav.SWEEP).run()
    assert not at.exception
    at.segmented_control(key="sweep:mode").set_value("Populations").run()
    assert not at.exception
    assert at.selectbox(key="population:picked").value == "pbt-page"
    assert "3 members × 3 intervals of 10 steps" in at.caption[-1].value
    assert "1 exploit so far" in at.caption[-1].value

    shown = figures(at)
    lineage = shown["population/pbt-page/lineage"]["data"]
    bars = [t for t in lineage if t.get("line", {}).get("width") == 10]
    assert sorted((t["x"][0], t["x"][1], t["y"][0]) for t in bars) == [
        (0, 10, 2), (0, 30, 0), (0, 30, 1), (10, 30, 2)
    ]  # fmt: skip
    # Coloured by the rate on its log range: the lowest, m2's first, darkest.
    colours = {(t["x"][0], t["y"][0]): t["line"]["color"] for t in bars}
    assert colours[(0, 2)] != colours[(10, 2)]
    (exploit,) = [t for t in lineage if t.get("line", {}).get("dash") == "dot"]
    assert (exploit["x"], exploit["y"]) == ([10, 10], [0, 2])

    schedule = {t["name"]: t for t in shown["population/pbt-page/schedule"]["data"]}
    assert (schedule["m2"]["x"], schedule["m2"]["y"]) == ([0, 10, 30], [0.3, 0.36, 0.36])
    assert (schedule["m1"]["x"], schedule["m1"]["y"]) == ([0, 30], [0.1, 0.1])
    (best,) = shown["population/pbt-page/best"]["data"]
    assert (best["x"], best["y"]) == ([10, 20, 30], [0.8, 0.86, 0.91])

    (ranking,) = [d.value for d in at.dataframe if "member" in d.value.columns]
    assert list(ranking["member"]) == ["m2", "m0", "m1"]
    assert list(ranking["val_accuracy"]) == pytest.approx([0.91, 0.9, 0.8])

    at.button(key="population:replay:pbt-page").click().run()
    assert not at.exception
    replay = next(run for run in lab.list() if run.name == "replay of pbt-page m2")
    assert replay.config["knob_schedule"] == [{"step": 11, "knobs": {"learning_rate": 0.36}}]
    assert replay.config == replay_config(lab, "p2f").to_dict()
    assert replay.config["hyperparameters"]["learning_rate"] == 0.3  # the lineage's first
    lab.stop(replay.id)
    wait_for(lambda: not lab.status(replay.id).active, scaled(60), "the replay stopped")


def test_a_store_without_a_population_says_how_to_train_one(lab: EngineClient) -> None:
    at = page(nav.SWEEP).run()
    at.segmented_control(key="sweep:mode").set_value("Populations").run()
    assert not at.exception
    assert any("optlab pbt" in info.value for info in at.info)


def test_every_machine_on_the_store_reads_the_same_population(store_location: str) -> None:
    """What the page draws is read from the store alone: a second connection (another
    machine's, on a shared PostgreSQL store) reads the population the first wrote."""
    with Store(store_location) as writer:
        written_population(writer)
    with Store(store_location) as store:
        view = read_population(EngineClient(store), "pbt-page")
    assert view is not None
    assert [(e.step, e.member, e.source) for e in view.exploits] == [(10, 2, 0)]
    assert [s.member for s in view.ranking()] == [2, 0, 1]
    assert [s.run.id for s in view.chain(2)] == ["p0", "p2f"]
    assert view.best_over_time() == [(10, 0.8), (20, 0.86), (30, 0.91)]


def test_a_population_started_on_the_page_is_driven_by_the_engine(lab: EngineClient) -> None:
    at = page(nav.SWEEP).run()
    at.segmented_control(key="sweep:mode").set_value("Populations").run()
    at.selectbox(key="population:optimizer").select("sgd").run()
    at.selectbox(key="population:model").select("mlp").run()
    at.selectbox(key="population:dataset").select("digits").run()
    at.number_input(key="population:members").set_value(2).run()
    at.number_input(key="population:interval").set_value(10).run()
    at.number_input(key="population:gen").set_value(2).run()
    at.text_input(key="population:perturb").input("0.8,twice").run()
    at.button(key="population:start").click().run()
    assert not at.exception
    assert [e.value for e in at.error if "perturb" in e.value]  # named, and nothing started
    assert lab.list() == []

    at.text_input(key="population:perturb").input("0.5,2").run()
    at.button(key="population:start").click().run()
    assert not at.exception
    name = at.selectbox(key="population:picked").value
    assert name.startswith("pbt-")

    def ended() -> bool:
        view = read_population(lab, name)
        return view is not None and {s.run.status for s in view.current.values()} == {"completed"}

    wait_for(ended, scaled(120), "the engine drove the page's population to its end")
    view = read_population(lab, name)
    assert view is not None and [e.step for e in view.exploits] == [10]
    assert {stretch.end for stretch in view.current.values()} == {20}
