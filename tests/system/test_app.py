"""Every page renders (streamlit.testing.v1.AppTest); the forms validate; actions reach
the engine."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from core import optimizers
from core.data import files
from core.engine import RunConfig
from core.escaping import escape_markdown
from core.knobs import InvalidInput
from core.recipes import RECIPES
from core.recipes.probe import SEED_STRIDE
from core.store.metrics import Block
from core.training.per_layer_schedule import BUDGET
from tests.apptest import (
    ROOT,
    SHORT,
    fill_sweep_form,
    finished_run,
    live_specs,
    page,
    trials_shown,
    trials_shown_complete,
)
from tests.waiting import holds_for, scaled, wait_for
from ui import nav


def test_home_page_without_runs(lab) -> None:
    at = page().run()
    assert not at.exception
    assert at.title[0].value.endswith("Optimizer Lab")
    assert any("No runs yet" in info.value for info in at.info)


def test_home_page_lists_runs(lab) -> None:
    run_id = finished_run(lab, name="listed run")
    at = page().run()
    assert not at.exception
    table = at.dataframe[0].value
    assert table["id"].tolist() == [run_id]
    assert table["name"].tolist() == ["listed run"]
    assert table["progress"].tolist() == [1.0]


def test_demo_race_starts_three_runs_with_the_same_seed_at_the_length_picked(lab) -> None:
    at = page().run()
    assert at.session_state["home:race_length"] == "1 minute"  # the default
    at.session_state["home:race_length"] = "3 minutes"
    at.button[0].click().run()
    runs = lab.list()
    assert sorted(r.config["optimizer"] for r in runs) == ["adamw", "projected_gd", "sgd"]
    assert {r.config["seed"] for r in runs} == {0}
    assert {(r.config["model"], r.config["dataset"]) for r in runs} == {("lenet", "mnist-5k")}
    assert {r.config["epochs"] for r in runs} == {175}
    for run in runs:
        lab.stop(run.id)


def test_home_page_does_not_import_tensorflow(tmp_path) -> None:
    code = "import sys, runpy; runpy.run_path('app.py'); print('tensorflow' in sys.modules)"
    env = {**os.environ, "OPTLAB_STORE": str(tmp_path / "lab.sqlite")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, env=env
    )
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_a_page_run_beside_an_engine_in_this_process_leaves_its_keras_session(
    lab, monkeypatch
) -> None:
    """The harness's promise (`tests.conftest.served`): Streamlit clears Keras's session
    after a script run only where Keras is imported, which the dashboard's process never
    does; here the engine's runs trace beside the pages, and a clear crashed TensorFlow."""
    import keras

    cleared = []
    monkeypatch.setattr(keras.backend, "clear_session", lambda *_, **__: cleared.append(1))
    page().run()
    assert cleared == []


def test_train_page_refuses_invalid_input_naming_the_field(lab) -> None:
    at = page(nav.TRAIN).run()
    assert not at.exception
    at.selectbox(key="run:optimizer").select("projected_gd").run()
    at.text_input(key="knob:projected_gd:learning_rate").input("-1").run()
    at.text_input(key="knob:projected_gd:radius").input("abc").run()
    at.text_input(key="run:batch_size").input("0").run()
    at.button(key="start").click().run()
    # As shown: the Markdown source escapes what the user typed (and the field names).
    errors = " ".join(e.value for e in at.error).replace("\\", "")
    assert "**learning_rate**: must be in (0, 100]" in errors
    assert "**radius**: must be a number" in errors
    assert "**batch_size**: must be in [1, 8192]" in errors
    assert lab.list() == []


def test_train_page_starts_a_run_in_the_engine(lab) -> None:
    at = page(nav.TRAIN).run()
    at.selectbox(key="run:dataset").select("digits").run()
    at.selectbox(key="run:model").select("mlp").run()
    at.selectbox(key="run:optimizer").select("sgd").run()
    at.text_input(key="knob:sgd:learning_rate").input("0.2").run()
    at.text_input(key="knob:sgd:clip_norm").input("1.5").run()
    at.text_input(key="run:max_steps").input("5").run()
    at.button(key="start").click().run()
    assert not at.exception
    (run,) = lab.list()
    assert run.config["hyperparameters"]["learning_rate"] == 0.2
    assert run.config["hyperparameters"]["clip_norm"] == 1.5
    assert run.config["max_steps"] == 5
    lab.wait(run.id, scaled(60))


def test_train_page_starts_a_private_run_refuses_a_bad_clip_and_warns_of_a_large_delta(
    lab,
) -> None:
    at = page(nav.TRAIN).run()
    at.selectbox(key="run:dataset").select("digits").run()
    at.selectbox(key="run:model").select("mlp").run()
    at.text_input(key="run:max_steps").input("4").run()
    at.text_input(key="run:dp_clip").input("0").run()
    at.button(key="start").click().run()
    errors = " ".join(e.value for e in at.error).replace("\\", "")
    assert "**dp_clip**: must be in (0, 1000]" in errors and lab.list() == []
    at.text_input(key="run:dp_clip").input("1").run()
    at.text_input(key="run:dp_delta").input("0.01").run()
    (warning,) = [w.value.replace("\\", "") for w in at.warning if "dp\\_delta" in w.value]
    assert "1/n = 1/1,438" in warning  # digits' training split, named before the start
    at.button(key="start").click().run()
    assert not at.exception
    (run,) = lab.list()
    assert (run.config["dp_clip"], run.config["dp_delta"]) == (1.0, 0.01)
    assert lab.wait(run.id, scaled(60)).status == "completed"
    assert "dp_epsilon" in lab.metrics(run.id)


def test_the_seeds_transformer_rules_fill_the_layer_rules_in_one_click(lab) -> None:
    at = page(nav.TRAIN).run()
    at.selectbox(key="run:dataset").select("digits").run()
    at.selectbox(key="run:model").select("mlp").run()
    at.text_input(key="run:max_steps").input("2").run()
    at.button(key="train:transformer-rules").click().run()
    at.button(key="start").click().run()
    assert not at.exception
    (run,) = lab.list()
    assert run.config["hyperparameters"]["layer_rules"] == [
        {"pattern": "norm|bias", "lr_mult": 1.0, "weight_decay": 0.0},
        {"pattern": "embedding", "lr_mult": 0.1, "weight_decay": None},
    ]
    lab.wait(run.id, scaled(60))


def test_train_page_offers_the_datasets_uploaded_and_a_cloned_runs_file(lab, tmp_path) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(60, 3)).astype("float32"), np.arange(60) % 2
    content = tmp_path / "mine.npz"
    np.savez(content, x_train=x[:50], y_train=y[:50], x_test=x[50:], y_test=y[50:])
    kept = files.keep(lab.store.datasets_folder, "my data!.npz", content.read_bytes())
    digest = hashlib.sha256(content.read_bytes()).hexdigest()
    assert kept == f"npz:{lab.store.datasets_folder.resolve() / f'my_data.{digest[:16]}.npz'}"
    elsewhere = f"npz:{content}"  # a CLI run's file, cloned

    at = page(nav.TRAIN)
    at.session_state["prefill"] = RunConfig(dataset=elsewhere, model="mlp", batch_size=10).to_dict()
    at.run()
    assert not at.exception
    picker = at.selectbox(key="run:dataset")
    assert picker.value == elsewhere and picker.options[-2:] == [
        f"your file my_data.npz ({digest[:8]})",
        "your file mine.npz",
    ]
    picker.select(kept).run()
    at.text_input(key="run:max_steps").input("3").run()
    at.button(key="start").click().run()
    assert not at.exception
    (run,) = lab.list()
    assert run.config["dataset"] == kept and lab.wait(run.id, scaled(60)).status == "completed"


def test_live_page_draws_a_long_run_from_its_summaries_and_zooms_to_every_step(lab) -> None:
    """A run of 300,000 logged steps is drawn from a bounded read, its spike kept; a range
    of 501 steps picked under "Steps" is drawn whole, every step at its value."""
    config = lab.status(finished_run(lab)).config
    lab.store.create_run("long", "long", config, status="running", total_steps=300_000)
    steps = np.arange(1, 300_001)
    loss = np.exp(-steps / 1e5) + 0.01 * np.sin(steps)
    loss[123_456] = 50.0
    for start in range(0, len(steps), 50_000):
        part = slice(start, start + 50_000)
        lab.store.append_metrics("long", Block(("loss",), steps[part], loss[None, part]))
    lab.store.finish("long", "completed", {"steps": 300_000})
    at = page(nav.LIVE)
    at.session_state["watch"] = ["long"]
    at.run()
    assert not at.exception

    def drawn_loss() -> tuple[np.ndarray, np.ndarray]:
        (trace,) = [
            t
            for spec in live_specs(at)
            for t in json.loads(spec)["data"]
            if t.get("name") == "long · train"
        ]
        return plotly_array(trace["x"]), plotly_array(trace["y"])

    x, y = drawn_loss()
    assert len(x) <= 1000 and y.max() == 50.0 and abs(x[y.argmax()] - 123_457) < 3_000
    at.number_input(key="live:from").set_value(100_000)
    at.number_input(key="live:to").set_value(100_500).run()
    assert not at.exception
    x, y = drawn_loss()
    np.testing.assert_array_equal(x, np.arange(100_000, 100_501))
    np.testing.assert_allclose(y, loss[99_999:100_500])


def test_live_says_how_often_each_run_records_its_per_layer_statistics(lab) -> None:
    logged_every_other = finished_run(lab)  # log_every 2: an explicit log_every wins
    budgeted = finished_run(lab, log_every=1)  # the budget's interval
    at = page(nav.LIVE)
    at.session_state["watch"] = [logged_every_other, budgeted]
    at.session_state["live_charts"] = "Per layer"
    at.run()
    assert not at.exception
    (caption,) = [c.value for c in at.caption if "per-layer every" in c.value]
    assert "per-layer every 2 steps" in caption
    assert f"(within {BUDGET:.0%} of the step time)" in caption


def plotly_array(data: list | dict) -> np.ndarray:
    """An array of a figure's JSON: a list, or NumPy's bytes as Plotly encodes them."""
    if isinstance(data, dict):
        return np.frombuffer(base64.b64decode(data["bdata"]), np.dtype(data["dtype"]))
    return np.asarray(data)


def test_live_page_controls_an_active_run(lab) -> None:
    run_id = lab.start(RunConfig.from_dict({**SHORT, "max_steps": None, "epochs": 10_000}))
    at = page(nav.LIVE)
    at.session_state["watch"] = [run_id]
    at.run()
    assert not at.exception
    assert not [c for c in at.caption if "cannot be steered" in c.value]
    # Moving a slider changes nothing until Apply, however often the page refreshes.
    slider = f"knob:{run_id}:radius:20.0"
    at.select_slider(key=slider).set_value(5.0).run()
    at.run().run()
    holds_for(
        lambda: not [e for e in lab.events(run_id) if e.kind == "knob"], 0.5, "no change sent"
    )
    at.select_slider(key=slider).set_value(5.0)
    at.button(key=f"apply:{run_id}").click().run()
    wait_for(
        lambda: [e for e in lab.events(run_id) if e.kind == "knob"],
        30,
        "the slider's change to reach the run",
    )
    (change,) = [e.payload for e in lab.events(run_id) if e.kind == "knob"]
    assert change == {"name": "radius", "value": 5.0, "previous": 20.0}
    at.button(key=f"pause:{run_id}").click().run()
    wait_for(lambda: lab.status(run_id).status == "paused", 30, "the pause button to pause")
    at.button(key=f"stop:{run_id}").click().run()
    assert lab.wait(run_id, scaled(30)).status == "stopped"


def test_optimizers_page_lists_every_optimizer(lab) -> None:
    at = page(nav.OPTIMIZERS).run()
    assert not at.exception
    labels = " ".join(e.label.replace("\\", "") for e in at.expander)  # Markdown escapes
    for name in (
        "sgd",
        "momentum",
        "adam",
        "adamw",
        "clipped_adam",
        "projected_gd",
        "scaled_sign_gd",
    ):
        assert f"**{name}**" in labels
    assert "θ ← θ − η·g;  θ ← θ·min(1, r/‖θ‖)" in [c.value for c in at.code]


def test_sweep_page_starts_a_sweep_whose_trials_are_runs(lab) -> None:
    at = page(nav.SWEEP).run()
    assert not at.exception
    assert any("No sweeps yet" in info.value for info in at.info)
    fill_sweep_form(at, n_trials=2)
    at.button(key="sweep:start").click().run()
    assert not at.exception
    assert not at.error, [e.value for e in at.error]
    wait_for(
        lambda: len(runs := lab.list()) == 2 and not any(r.active for r in runs),
        120,
        "the sweep's two trials to end",
        interval=0.2,
    )
    runs = lab.list()
    assert len(runs) == 2 and {r.config["model"] for r in runs} == {"mlp"}
    assert len({r.config["hyperparameters"]["learning_rate"] for r in runs}) == 2
    wait_for(lambda: trials_shown_complete(at), 120, "the trials shown complete", 0.2)
    (trials,) = trials_shown(at)
    assert len(trials) == 2 and trials["value"].notna().all()


def test_sweep_page_refuses_a_bad_space_naming_the_field(lab) -> None:
    at = page(nav.SWEEP).run()
    at.selectbox(key="sweep:optimizer").select("sgd").run()
    editor_key = "sweep:dimensions:sgd"
    at.session_state[editor_key] = {
        "edited_rows": {0: {"low": -1.0}},
        "added_rows": [],
        "deleted_rows": [],
    }
    at.button(key="sweep:start").click().run()
    errors = " ".join(e.value for e in at.error).replace("\\", "")  # Markdown escapes
    # Named by its knob (issue 39), not by its place in a list ("dimensions[0].low").
    assert "**learning_rate, low**: must be in (0, 100] (got -1.0)" in errors
    assert lab.list() == []


def test_sliders_offer_only_values_the_knob_takes_and_headers_show_current_ones(lab) -> None:
    run_id = lab.start(
        RunConfig.from_dict(
            {
                **SHORT,
                "optimizer": "adamw",
                "max_steps": None,
                "epochs": 10_000,
                "hyperparameters": {"learning_rate": 0.01, "weight_decay": 0.004},
            }
        )
    )
    at = page(nav.LIVE)
    at.session_state["watch"] = [run_id]
    at.run()
    learning_rate = at.select_slider(key=f"knob:{run_id}:learning_rate:0.01")
    assert "0" not in learning_rate.options and "0.01" in learning_rate.options
    assert "0" in at.select_slider(key=f"knob:{run_id}:weight_decay:0.004").options
    # A change made elsewhere (another tab, the CLI) shows in the header and the slider.
    lab.settle(lab.update(run_id, learning_rate=0.02))
    wait_for(lambda: lab.status(run_id).knobs["learning_rate"] == 0.02, 30, "the change to land")
    at.run()
    assert "lr 0\\.02" in at.markdown[0].value  # escaped: knob values come from the store
    assert at.select_slider(key=f"knob:{run_id}:learning_rate:0.02").value == 0.02
    home = page().run()
    assert "lr 0.02" in home.dataframe[0].value["knobs"].tolist()[0]
    lab.settle(lab.stop(run_id))


def test_home_filters_tags_and_deletes_runs(lab) -> None:
    kept = finished_run(lab, name="kept run")
    gone = finished_run(lab, name="doomed run", optimizer="adam")
    at = page().run()
    at.text_input(key="runs_filter").input("doomed").run()
    assert at.dataframe[0].value["id"].tolist() == [gone]
    at.text_input(key="runs_filter").input("").run()
    at.multiselect(key="runs_status_filter").select("running").run()
    assert at.dataframe[0].value.empty
    lab.set_tags(kept, ["baseline"])
    at.multiselect(key="runs_status_filter").unselect("running").run()
    at.text_input(key="runs_filter").input("baseline").run()
    assert at.dataframe[0].value["id"].tolist() == [kept]
    lab.delete(gone)
    assert [run.id for run in lab.list()] == [kept]
    assert len(lab.metrics(gone)) == 0 and lab.events(gone) == []


def stopped_run(lab, **changes) -> str:
    """A run stopped after step 20, with checkpoints every 5 steps."""
    config = {**SHORT, "max_steps": 300, "checkpoint_every": 5, **changes}
    run_id = lab.start(RunConfig.from_dict(config))
    wait_for(lambda: lab.status(run_id).step >= 20, 60, "step 20")
    lab.settle(lab.stop(run_id))
    assert lab.wait(run_id, scaled(30)).status == "stopped"
    return run_id


def test_live_resumes_a_stopped_run_from_its_checkpoint(lab) -> None:
    run_id = stopped_run(lab)
    last = lab.checkpoints(run_id)[-1].step
    at = page(nav.LIVE)
    at.session_state["watch"] = [run_id]
    at.run()
    assert not at.exception
    assert f"at step {last:,}" in at.button(key=f"continue:{run_id}").help
    at.button(key=f"continue:{run_id}").click().run()
    assert not at.exception
    assert lab.wait(run_id, scaled(60)).status == "completed"
    assert [e.step for e in lab.events(run_id) if e.kind == "restored"] == [last]
    total = lab.status(run_id).total_steps
    assert lab.metrics(run_id).steps.tolist() == list(range(2, total + 1, 2))  # each step once


def test_home_resumes_every_interrupted_run(lab) -> None:
    first, second = stopped_run(lab), stopped_run(lab, seed=1)
    for run_id in (first, second):  # as a crash leaves them
        lab.store.finish(run_id, "interrupted", lab.status(run_id).final_metrics)
    at = page().run()
    assert at.dataframe[0].value["checkpoints MB"].min() > 0
    (button,) = [b for b in at.button if b.label.startswith("Resume all interrupted")]
    assert button.label == "Resume all interrupted (2)"
    button.click().run()
    assert not at.exception
    for run_id in (first, second):
        assert lab.wait(run_id, scaled(90)).status == "completed"


def test_live_offers_the_model_of_the_last_or_the_best_checkpoint(lab) -> None:
    run_id = finished_run(lab, max_steps=40, checkpoint_every=10, val_every=10)
    saved = lab.checkpoints(run_id)
    best = max(saved, key=lambda c: (c.val_accuracy, c.step))
    at = page(nav.LIVE)
    at.session_state["watch"] = [run_id]
    at.run()
    assert not at.exception
    choices = at.radio(key=f"model:checkpoint:{run_id}").options
    assert choices[0] == "last · step 40"
    assert len(choices) == (1 if best.step == 40 else 2)
    (button,) = at.get("download_button")
    assert button.proto.label == "Download .keras" and button.proto.ignore_rerun

    # What the click calls: the engine writes the file once, this process reads it.
    path = lab.model_file(run_id, "best")
    assert path.name == f"step-{best.step}.keras" and path.stat().st_size > 10_000
    model = optimizers.load_model(path)
    assert int(model.optimizer.iterations.numpy()) == best.step
    written = path.stat().st_mtime_ns
    assert lab.model_file(run_id, str(best.step)) == path  # kept: not written again
    assert path.stat().st_mtime_ns == written
    with pytest.raises(InvalidInput, match=r"checkpoint: run .* has no '15' checkpoint"):
        lab.model_file(run_id, "15")
    lab.delete(run_id)
    assert not path.exists()  # gone with the run


def test_live_forks_a_run_and_draws_the_branch(lab) -> None:
    parent = finished_run(lab, max_steps=40, checkpoint_every=10, log_every=1)
    at = page(nav.LIVE)
    at.session_state["watch"] = [parent]
    at.run()
    assert at.select_slider(key=f"fork-step:{parent}").value == 40
    at.select_slider(key=f"fork-step:{parent}").set_value(20)
    at.number_input(key=f"fork-knob:{parent}:learning_rate").set_value(0.05)
    at.number_input(key=f"fork-steps:{parent}").set_value(60)
    (submit,) = [b for b in at.button if b.label == "Start the fork"]
    submit.click().run()
    assert not at.exception
    (fork,) = [run for run in lab.list() if run.parent == parent]
    assert fork.forked_at == 20 and fork.config["hyperparameters"]["learning_rate"] == 0.05
    assert lab.wait(fork.id, scaled(60)).status == "completed"
    assert lab.metrics(fork.id).steps.tolist() == list(range(21, 61))

    at = page(nav.LIVE)
    at.session_state["watch"] = [fork.id]
    at.run()
    assert not at.exception
    loss = live_specs(at)[0]
    assert '"dash":"dot"' in loss.replace(" ", "") and "train before the fork" in loss
    at.button(key=f"family:{fork.id}").click().run()
    assert at.multiselect(key="live_runs").value == [parent, fork.id]


def test_a_run_keeps_its_colour_from_live_to_compare(lab) -> None:
    first, second = finished_run(lab, name="first"), finished_run(lab, name="second", seed=1)

    def train_colour(specs: list[str], run_id: str) -> str:
        name = lab.status(run_id).name
        figures = [json.loads(spec) if isinstance(spec, str) else spec for spec in specs]
        loss = next(f for f in figures if f["layout"].get("uirevision") == "loss")
        return next(t["line"]["color"] for t in loss["data"] if t["name"] == f"{name} · train")

    at = page(nav.LIVE)
    at.session_state["watch"] = [second]  # alone on Live: the first colour were it by place
    at.run()
    on_live = train_colour(live_specs(at), second)
    at.switch_page(nav.COMPARE.file)
    at.session_state["compare"] = [first, second]
    at.run()
    assert not at.exception
    specs = [chart.proto.spec for chart in at.get("plotly_chart")]
    assert train_colour(specs, second) == on_live
    assert train_colour(specs, first) != on_live


def test_the_recipes_page_starts_a_recipe_and_shows_its_verdict_box(lab) -> None:
    at = page(nav.RECIPES).run()
    assert not at.exception
    cards = [b for b in at.button if b.label == "Run it"]
    assert len(cards) == len(RECIPES)
    at.button(key="recipe:run:projection").click().run()  # three radii, and one run without
    assert not at.exception, [e.value for e in at.exception]
    runs = lab.list()
    assert len(runs) == 4 and all(r.tags == ("recipe:projection",) for r in runs)
    assert at.subheader[0].value == escape_markdown("Projection keeps the weights in a ball")
    assert "runs has ended yet" in at.info[0].value or "So far" in at.info[0].value
    for run in runs:
        lab.stop(run.id)
    for run in runs:
        lab.wait(run.id, scaled(60))
        lab.delete(run.id)
    at.run()  # its runs deleted: the gallery alone, no error
    assert not at.exception and not at.subheader


def test_try_to_break_it_names_a_bad_value_then_starts_the_control(lab) -> None:
    at = page(nav.RECIPES).run()
    at.text_area(key="recipe:set:projection").input("radius=-1").run()
    at.button(key="recipe:probe:projection").click().run()
    assert not at.exception and lab.list() == []  # nothing started
    assert escape_markdown("radius: must be in (0, 1e+06]") in at.error[0].value
    at.text_area(key="recipe:set:projection").input("radius").run()  # not KNOB=VALUE
    assert escape_markdown("must read KNOB=VALUE") in at.error[0].value
    assert at.button(key="recipe:probe:projection").disabled
    at.text_area(key="recipe:set:projection").input("").run()
    at.number_input(key="recipe:seed:projection").set_value(1).run()
    at.checkbox(key="recipe:control:projection").check().run()
    at.button(key="recipe:probe:projection").click().run()
    assert not at.exception, [e.value for e in at.exception]
    runs = lab.list()
    assert len(runs) == 4
    assert {r.config["hyperparameters"]["radius"] for r in runs} == {1000.0}
    assert {r.config["seed"] for r in runs} == {SEED_STRIDE}
    assert any("Its negative control" in c.value and "seed 1" in c.value for c in at.caption)
    # A new session (a reload) reads the probe from the store: over its charts and its card.
    labels = [c.value for c in page(nav.RECIPES).run().caption if "negative control" in c.value]
    assert len(labels) == 2 and all("seed 1" in label for label in labels), labels
    for run in runs:
        lab.stop(run.id)
    for run in runs:
        lab.wait(run.id, scaled(60))
        lab.delete(run.id)
