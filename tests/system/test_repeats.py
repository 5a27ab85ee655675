"""Repeats as a user makes them: `train --repeats`, Train's repeats field, and Compare
saying whether one group beats another."""

from __future__ import annotations

import json

import pytest

from core.engine import RunConfig
from core.engine.repeats import repeat_configs
from core.escaping import escape_markdown
from core.store import Store
from tests.apptest import (
    SHORT,
    fill_sweep_form,
    live_specs,
    page,
    trials_shown,
    trials_shown_complete,
)
from tests.cli import run_main
from tests.lean import NO_INSTRUMENTS_FLAGS
from tests.waiting import scaled, wait_for
from ui import nav

DIGITS = (
    *("--dataset", "digits", "--model", "mlp", "--optimizer", "sgd", "--max-steps", "12"),
    *NO_INSTRUMENTS_FLAGS,
)


@pytest.mark.parametrize(
    ("vary", "same"), [("init", "first_batch_sha256"), ("data", "weights_sha256")]
)
def test_train_repeats_one_config_over_seeds_as_one_group(tmp_path, vary, same) -> None:
    store = tmp_path / "lab.sqlite"
    code, out, err = run_main(
        "train", "--store", store, *DIGITS, "--seed", "5", "--repeats", "3", "--vary", vary
    )
    assert code == 0, err
    lines = out.splitlines()
    run_ids = lines[:3]
    assert lines[-1] == "  (mean ± half the 95% t-interval over the runs)"
    assert any(line.startswith("  val_accuracy ") and " ± " in line for line in lines)
    code, out, _ = run_main("runs", "--json", "--store", store)
    runs = {run["id"]: run for run in json.loads(out)}
    assert len({runs[i]["group"] for i in run_ids}) == 1 and runs[run_ids[0]]["group"]
    assert all(runs[i]["status"] == "completed" for i in run_ids)
    with Store(store) as opened:
        starts = [opened.events(i, "init")[0].payload for i in run_ids]
    differs = ({"weights_sha256", "first_batch_sha256"} - {same}).pop()
    assert len({s[same] for s in starts}) == 1  # what the seeds leave alone
    assert len({s[differs] for s in starts}) == 3  # what they vary


def test_bad_repeats_are_refused_and_write_nothing(tmp_path) -> None:
    store = tmp_path / "lab.sqlite"
    code, _, err = run_main("train", "--store", store, *DIGITS, "--repeats", "0")
    assert code == 2 and "repeats" in err and not store.exists()


def test_train_page_starts_the_repeats_and_watches_them(lab) -> None:
    at = page(nav.TRAIN).run()
    at.selectbox(key="run:dataset").select("digits").run()
    at.selectbox(key="run:model").select("mlp").run()
    at.text_input(key="run:max_steps").input("5").run()
    at.number_input(key="train:repeats").set_value(3).run()
    at.selectbox(key="train:vary").select("init").run()
    at.button(key="start").click().run()
    assert not at.exception
    runs = lab.list()
    assert len(runs) == 3 and len({r.config["group"] for r in runs}) == 1
    assert sorted(r.config["seed"] for r in runs) == [0, 1, 2]
    assert {r.config["data_seed"] for r in runs} == {None, 0}
    assert sorted(at.session_state["live_runs"]) == sorted(r.id for r in runs)  # on Live
    for run in runs:
        lab.wait(run.id, scaled(60))


def test_compare_says_whether_one_group_beats_the_other(lab) -> None:
    fast = RunConfig.from_dict({**SHORT, "max_steps": 30, "name": "fast"})
    slow = fast.replace(
        name="slow", hyperparameters={**fast.hyperparameters, "learning_rate": 0.001}
    )
    run_ids = [lab.start(c) for config in (fast, slow) for c in repeat_configs(config, 3)]
    for run_id in run_ids:
        lab.wait(run_id, scaled(60))
    at = page(nav.COMPARE).run()
    assert not at.exception
    at.selectbox(key="compare:metric").select("val_loss").run()
    shown = [m.value.replace("\\", "") for m in at.markdown]  # as the page shows it
    sentence = next(text for text in shown if "over 3 and 3 seeds" in text)
    assert sentence.startswith("slow's final val_loss is ") and " higher than fast's " in sentence
    assert "(95% Welch interval; p = " in sentence and "by a permutation test" in sentence
    charts = [c for c in at.get("plotly_chart") if "group means, 95% t-bands" in c.proto.spec]
    assert len(charts) == 1
    at.radio(key="compare:at").set_value("time to reach").run()
    at.number_input(key="compare:target").set_value(0.5).run()
    assert not at.exception
    assert any("steps to val_loss ≤ 0.5" in m.value.replace("\\", "") for m in at.markdown)

    live = page(nav.LIVE)
    live.session_state["watch"] = run_ids[:3]  # the fast group
    live.run()
    live.segmented_control(key="live_charts").set_value("Groups").run()
    assert not live.exception
    figures = live_specs(live)
    assert len(figures) == 2 and all("fast" in f and "(3 runs)" in f for f in figures)


def test_the_demo_race_races_each_optimizer_over_seeds(lab) -> None:
    at = page().run()
    at.number_input(key="home:race_repeats").set_value(2).run()
    at.button[0].click().run()
    assert not at.exception
    runs = lab.list()
    by_group: dict[str, list] = {}
    for run in runs:
        by_group.setdefault(run.config["group"], []).append(run)
    assert len(runs) == 6 and len(by_group) == 3
    for members in by_group.values():
        assert len({r.config["optimizer"] for r in members}) == 1
        assert sorted(r.config["seed"] for r in members) == [0, 1]
    for run in runs:
        lab.stop(run.id)


def test_a_fork_or_a_clone_of_a_repeat_is_not_one_more_of_its_group(lab) -> None:
    config = RunConfig.from_dict({**SHORT, "max_steps": 20, "checkpoint_every": 10})
    first, second = [lab.start(c) for c in repeat_configs(config, 2)]
    lab.wait(first, scaled(60))
    lab.wait(second, scaled(60))
    fork = lab.fork(first, 10, learning_rate=0.05)
    assert lab.status(fork).config["group"] is None
    lab.wait(fork, scaled(60))
    at = page(nav.TRAIN)
    at.session_state["prefill"] = lab.status(first).config  # Clone
    at.run()
    at.button(key="start").click().run()
    assert not at.exception
    (clone,) = [
        r
        for r in lab.list()
        if r.id not in {first, second, fork} and r.name == lab.status(first).name
    ]
    assert clone.config["group"] is None and clone.config["seed"] == 0
    lab.wait(clone.id, scaled(60))


def test_the_sweep_page_values_each_trial_over_seeds(lab) -> None:
    at = page(nav.SWEEP).run()
    fill_sweep_form(at, n_trials=1)
    at.number_input(key="sweep:repeats").set_value(2).run()
    at.button(key="sweep:start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    wait_for(lambda: trials_shown_complete(at), 120, "the trial shown complete", 0.2)
    (trial,) = trials_shown(at)[0].to_dict("records")
    runs = lab.list()
    assert len(runs) == 2 and len({r.config["group"] for r in runs}) == 1
    bests = [r.final_metrics["best_val_accuracy"] for r in runs]
    assert trial["value"] == pytest.approx(sum(bests) / 2) and trial["± (95%)"] >= 0
    mean = escape_markdown("the mean over its 2 runs (seeds)")  # the caption is Markdown
    assert any("2 seeds a trial" in c.value and mean in c.value for c in at.caption)
