"""The learning-rate range test as a user runs it: `python -m core lr-find`, the Train
page's button and "Use this rate", and Live showing a test again."""

from __future__ import annotations

import json

import numpy as np
import pytest

from core import optimizers
from core.engine import RunConfig
from core.engine.lr_find import RangeTest, range_test_config
from core.store import LR_FIND_ENDED_EVENT, Store
from tests.apptest import live_specs, page
from tests.cli import run_main
from tests.waiting import scaled
from ui import nav

DIGITS = ("--dataset", "digits", "--model", "mlp", "--batch-size", "32")


def test_the_cli_prints_the_curve_and_the_suggested_rate_last(tmp_path) -> None:
    store = tmp_path / "lab.sqlite"
    code, out, err = run_main("lr-find", "--store", store, *DIGITS, "--optimizer", "adam")
    assert code == 0, err
    run_id, *curve, last = out.strip().splitlines()
    assert last.startswith("suggested learning_rate: ")
    suggested = float(last.split(": ")[1])
    assert 1e-5 < suggested < 1.0  # adam on the digits trains between these
    assert any(line.endswith("<- suggested") for line in curve)
    assert any(line.startswith("ended early: the loss exploded") for line in curve), out

    code, out, _ = run_main("runs", "--json", "--store", store)
    (run,) = json.loads(out)
    assert run["id"] == run_id and run["kind"] == "lr_find" and run["status"] == "completed"
    assert run["name"] == "LR range test · adam · mlp · digits"
    with Store(store) as opened:
        metrics = opened.read_metrics(run_id)
        (ended,) = opened.events(run_id, LR_FIND_ENDED_EVENT)
    rates = metrics["learning_rate"]
    assert rates[0] == pytest.approx(1e-7, rel=1e-5)
    assert np.allclose(rates[1:] / rates[:-1], 10 ** (8 / 199), rtol=1e-4)  # to 10 in 200
    assert len(rates) == ended.step < 200  # it ended where the loss exploded
    assert "val_loss" not in metrics  # a range test does not validate


def test_the_cli_json_has_the_curve_and_the_range_flags_apply(tmp_path) -> None:
    code, out, err = run_main(
        "lr-find",
        "--store",
        tmp_path / "lab.sqlite",
        *DIGITS,
        "--optimizer",
        "sgd",
        "--lr-find-start",
        "1e-4",
        "--learning-rate",
        "1",
        "--max-steps",
        "50",
        "--json",
    )
    assert code == 0, err
    result = json.loads(out)
    rates = result["learning_rate"]
    assert rates[0] == pytest.approx(1e-4, rel=1e-5)
    assert len(rates) == 50 and rates[-1] == pytest.approx(1.0, rel=1e-5)  # never exploded
    assert result["ended_early"] is None
    assert len(result["loss"]) == len(result["smoothed_loss"]) == 50
    assert result["suggested_learning_rate"] in rates


def test_bad_range_flags_are_refused_by_name_and_write_nothing(tmp_path) -> None:
    store = tmp_path / "lab.sqlite"
    code, _, err = run_main(
        "lr-find", "--store", store, *DIGITS, "--learning-rate", "0.1", "--lr-find-start", "1"
    )
    assert code == 2 and "lr_find_start" in err and "below learning_rate" in err
    assert not store.exists()


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", [spec.name for spec in optimizers.specs()])
def test_every_optimizer_takes_the_range_with_a_radius_and_clipping(lab, optimizer) -> None:
    config = RunConfig(
        dataset="digits",
        model="mlp",
        optimizer=optimizer,
        batch_size=32,
        hyperparameters={"radius": 30.0, "clip_norm": 1.0},
    )
    run_id = lab.start(range_test_config(config, steps=40, start=1e-5, end=1.0))
    assert lab.wait(run_id, scaled(120)).status == "completed"
    metrics = lab.metrics(run_id)
    rates = metrics["learning_rate"]
    assert rates[0] == pytest.approx(1e-5, rel=1e-4) and rates[-1] == pytest.approx(1.0, 1e-4)
    assert np.nanmax(metrics["param_norm"]) <= 30.0 * (1 + 1e-5)  # the radius held
    assert np.all(np.isfinite(metrics["loss"]))
    assert RangeTest.of(metrics).rates.tolist() == rates.tolist()


def test_the_train_page_finds_a_rate_and_uses_it(lab) -> None:
    at = page(nav.TRAIN).run()
    at.selectbox(key="run:dataset").select("digits").run()
    at.selectbox(key="run:model").select("mlp").run()
    at.selectbox(key="run:optimizer").select("momentum").run()
    at.text_input(key="run:max_steps").input("77").run()
    at.button(key="lr_find").click().run()
    assert not at.exception
    (run,) = lab.list()
    assert run.config["kind"] == "lr_find" and run.config["optimizer"] == "momentum"
    assert run.config["max_steps"] == 200 and run.config["hyperparameters"]["learning_rate"] == 10
    lab.wait(run.id, scaled(120))
    at.run()
    assert not at.exception
    (spec,) = live_specs(at)
    assert "Loss as the learning rate grows" in spec
    suggested = RangeTest.of(lab.metrics(run.id)).suggestion
    assert suggested is not None
    assert any(f"**{suggested:.3g}**" in m.value for m in at.markdown)
    at.button(key=f"lr_find:use:{run.id}").click().run()
    assert not at.exception
    assert (
        at.text_input(key="knob:momentum:learning_rate").value == f"{float(f'{suggested:.3g}'):g}"
    )
    assert at.text_input(key="run:max_steps").value == "77"  # the rest of the form stays
    assert len(lab.list()) == 1  # nothing else started


def test_live_shows_a_range_test_again_and_hands_its_rate_to_train(lab) -> None:
    config = RunConfig(dataset="digits", model="mlp", optimizer="adamw", batch_size=32)
    run_id = lab.start(range_test_config(config))
    lab.wait(run_id, scaled(120))
    at = page(nav.LIVE)
    at.session_state["watch"] = [run_id]
    at.run()
    assert not at.exception
    assert any("Loss as the learning rate grows" in spec for spec in live_specs(at))
    suggested = RangeTest.of(lab.metrics(run_id)).suggestion
    at.button(key=f"lr_find:use:{run_id}").click().run()
    assert not at.exception
    # On Train now, the form holds the test's config at the suggested rate.
    assert at.text_input(key="knob:adamw:learning_rate").value == f"{suggested:.3g}"
    assert at.selectbox(key="run:optimizer").value == "adamw"
    assert at.selectbox(key="run:dataset").value == "digits"
    assert at.text_input(key="run:batch_size").value == "32"
    # The fields the test set are back at their defaults.
    assert at.text_input(key="run:max_steps").value == ""
    assert at.text_input(key="run:epochs").value == "10"
    assert at.text_input(key="run:name").value == ""
