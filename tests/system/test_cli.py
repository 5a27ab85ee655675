"""Tests of the command line, `python -m core`: mostly in-process through `main`, and a few
real subprocesses for exit statuses, Ctrl-C and a SIGKILL in the middle of a run."""

import contextlib
import csv
import json
import math
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from core.cli import build_parser, main, render_progress, run_config
from core.engine import Engine, RunStatus
from core.engine.checkpoints import RunCheckpoints
from core.export import LEADING_COLUMNS
from core.knobs import InvalidInput
from core.store import HISTOGRAM_EVENT, Store
from core.training import threads
from tests.cli import run_main
from tests.lean import NO_INSTRUMENTS_FLAGS
from tests.waiting import scaled, wait_for, wait_for_moment

PROJECT_ROOT = Path(__file__).resolve().parents[2]
RUN_ID = re.compile(r"^\d{4}-[0-9a-f]{6}$")
# The flags `train` must have (besides any that plugins' knobs add).
TRAIN_FLAGS = [
    "--model", "--dataset", "--optimizer", "--lr", "--learning-rate", "--radius",
    "--weight-decay", "--clip-norm", "--top-k", "--top-k-error-feedback", "--noise-std",
    "--noise-seed", "--prune-threshold", "--layer-rule", "--momentum", "--nesterov",
    "--beta-1", "--beta-2", "--epsilon", "--epsilon-inside-sqrt", "--batch-size", "--epochs",
    "--max-steps", "--seed", "--log-every", "--val-every", "--no-telemetry", "--multitask",
    "--task-weight", "--strategy", "--name", "--data-dir", "--store", "--config",
]  # fmt: skip
# A small real run: 30 MLP steps take about a second.
SHORT_RUN = [
    *("--max-steps", "30", "--log-every", "5", "--model", "mlp", "--batch-size", "32"),
    *NO_INSTRUMENTS_FLAGS,
]


def error_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def spawn(tmp_path, *argv, **kwargs):
    """`python -m core ARGV` in the project root; its stderr (TensorFlow's logs and the
    progress) goes to a file, so that a full pipe never blocks it."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **kwargs.pop("env", {})}
    return subprocess.Popen(
        [sys.executable, "-m", "core", *map(str, argv)],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "stderr.txt").open("w"),
        text=True,
        **kwargs,
    )


def stored_last_step(store, run_id):
    return store.read_metrics(run_id).last_step or 0


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One short real run through `main`, shared by the tests that read it back."""
    store = tmp_path_factory.mktemp("trained") / "lab.sqlite"
    code, out, err = run_main("train", "--store", store, "--name", "cli run", *SHORT_RUN)
    return SimpleNamespace(store=store, code=code, out=out, err=err, run_id=out.split("\n")[0])


# train -----------------------------------------------------------------------------------


def test_train_prints_the_run_id_progress_and_final_metrics(trained):
    assert trained.code == 0, trained.err
    assert RUN_ID.match(trained.run_id)
    assert f"run {trained.run_id} completed: 30/30 steps" in trained.out
    assert re.search(r"^  val_accuracy +0\.\d+$", trained.out, re.MULTILINE)
    assert re.search(r"^  loss +\d", trained.out, re.MULTILINE)
    last_progress = trained.err.strip().splitlines()[-1]
    assert "30/30" in last_progress and "100%" in last_progress and "completed" in last_progress

    with Store(trained.store) as store:
        record = store.get_run(trained.run_id)
    assert (record.status, record.name, record.total_steps) == ("completed", "cli run", 30)
    # No knob given: adamw's own defaults apply.
    assert record.config["hyperparameters"]["learning_rate"] == 0.001
    assert record.config["hyperparameters"]["weight_decay"] == 0.004


def test_a_diverging_run_exits_1_with_the_reason(tmp_path):
    # lr 1e4 is out of range (at most 100), and lr 100 alone overflows the MLP for some
    # seeds only; with gradient noise of std 100 too, the loss is infinite by step 4 for
    # every seed tried.
    store = tmp_path / "lab.sqlite"
    code, out, err = run_main(
        "train", "--store", store, "--optimizer", "sgd", "--lr", "100", "--noise-std", "100",
        *SHORT_RUN,
    )  # fmt: skip
    assert code == 1
    assert f"run {out.splitlines()[0]} diverged" in out
    [line] = error_lines(err)
    assert re.match(r"error: run \S+ diverged: the loss was (inf|nan) at step \d+$", line)
    with Store(store) as opened:
        [record] = opened.list_runs()
    assert record.status == "diverged"
    code, out, _ = run_main("runs", "--json", "--store", store)
    [run] = json.loads(out)  # strict JSON: the infinite loss reads as null
    assert (code, run["status"], run["final_metrics"]["loss"]) == (0, "diverged", None)


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (["--lr", "-1"], "learning_rate"),
        (["--lr", "1e4"], "learning_rate"),
        (["--radius", "0"], "radius"),
        (["--optimizer", "nope"], "optimizer"),
        (["--layer-rule", "(:1"], "layer_rules"),
        (["--epochs", "2.5"], "epochs"),
        (["--optimizer", "sgd", "--beta-1", "0.5"], "beta_1"),
        (["--task-weight", "digit=0", "--task-weight", "parity=0"], "task_weights"),
        (["--alpha-every", "-1"], "alpha_every"),
    ],
)
def test_bad_flags_exit_2_with_one_line_and_write_nothing(tmp_path, flags, field):
    store = tmp_path / "lab.sqlite"
    code, out, err = run_main("train", "--store", store, *flags)
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {field}")
    assert not store.exists()


def test_a_malformed_flag_is_an_argparse_error(tmp_path):
    code, _, err = run_main("train", "--store", tmp_path / "lab.sqlite", "--layer-rule", "dense")
    assert code == 2
    assert "argument --layer-rule: needs PATTERN:LR_MULT[:WEIGHT_DECAY]" in err
    assert not (tmp_path / "lab.sqlite").exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", r"config: \S+ is not valid JSON"),
        ("[1, 2]", r"config: \S+ must hold a JSON object, not list"),
        ('{"max_steps": 5, "learning_rate": 0.1}', "learning_rate: unknown field"),
        ('{"hyperparameters": {"radius": -1}}', "radius: must be in"),
        (None, r"config: cannot read \S+: No such file or directory"),
    ],
)
def test_bad_config_files_exit_2(tmp_path, text, message):
    config = tmp_path / "run.json"
    if text is not None:
        config.write_text(text)
    store = tmp_path / "lab.sqlite"
    code, _, err = run_main("train", "--store", store, "--config", config)
    assert code == 2
    [line] = err.splitlines()
    assert re.match(f"error: {message}", line)
    assert not store.exists()


def parse_train(*flags):
    return run_config(build_parser().parse_args(["train", *flags]))


def test_flags_override_the_config_file(tmp_path):
    config = tmp_path / "run.json"
    config.write_text(
        json.dumps(
            {
                "optimizer": "sgd",
                "max_steps": 7,
                "hyperparameters": {"learning_rate": 0.5, "clip_norm": 2.0},
                "task_weights": {"parity": 0.5},
            }
        )
    )
    parsed = parse_train(
        "--config", str(config), "--lr", "0.05", "--max-steps", "9", "--task-weight", "digit=2"
    )
    assert (parsed.optimizer, parsed.max_steps) == ("sgd", 9)
    assert parsed.hyperparameters["learning_rate"] == 0.05
    assert parsed.hyperparameters["clip_norm"] == 2.0
    assert dict(parsed.task_weights) == {"digit": 2.0, "parity": 0.5}


def test_instrument_intervals_are_flags():
    parsed = parse_train(
        "--alpha-every",
        "0",
        "--sharpness-every",
        "25",
        "--noise-scale-every",
        "3",
        "--histogram-every",
        "7",
    )
    assert (parsed.alpha_every, parsed.sharpness_every) == (0, 25)
    assert (parsed.noise_scale_every, parsed.histogram_every) == (3, 7)


def test_only_the_knobs_given_are_set():
    assert parse_train("--optimizer", "adam").hyperparameters["learning_rate"] == 0.001
    assert parse_train("--optimizer", "sgd").hyperparameters["learning_rate"] == 0.01
    assert parse_train("--learning-rate", "0.2").hyperparameters["learning_rate"] == 0.2
    off = parse_train("--optimizer", "adam", "--weight-decay", "none")
    assert off.hyperparameters["weight_decay"] is None
    with pytest.raises(InvalidInput, match="weight_decay: is required by adamw"):
        parse_train("--weight-decay", "none")  # adamw's is its own, as Keras's AdamW's
    assert parse_train("--no-telemetry").telemetry is False
    assert parse_train("--multitask").multitask is True
    assert parse_train("--optimizer", "momentum", "--nesterov").hyperparameters["nesterov"]
    rules = parse_train(
        "--layer-rule", "dense:0.5:0.01", "--layer-rule", "ns:logits:2"
    ).hyperparameters["layer_rules"]
    assert [(r.pattern, r.lr_mult, r.weight_decay) for r in rules] == [
        ("dense", 0.5, 0.01),
        ("ns:logits", 2.0, None),
    ]


def test_help_lists_every_flag(capsys):
    assert main(["--help"]) == 0
    assert "train" in capsys.readouterr().out
    assert main(["train", "--help"]) == 0
    text = capsys.readouterr().out
    for flag in TRAIN_FLAGS:
        assert re.search(rf"{flag}\b", text), flag
    assert "In (0, 100]" in text  # ranges come from the knobs
    for command in ("runs", "export"):
        assert main([command, "--help"]) == 0
        assert "--store" in capsys.readouterr().out


def test_progress_line():
    status = RunStatus(
        id="1130-abcdef",
        name="n",
        status="running",
        config={},
        step=31,
        total_steps=62,
        created=0.0,
        started=0.0,
        finished=None,
        error=None,
        final_metrics=None,
    )
    line = render_progress(status, {"loss": 0.41, "val_accuracy": 0.9}, 10.0, width=8)
    assert line == "[####----]  31/62   50%  loss 0.41  val_acc 0.9000  10.0 steps/s  ETA 0:03"
    starting = RunStatus(**{**status.__dict__, "step": 0})
    assert render_progress(starting, {}, None) == "1130-abcdef  starting"


# runs and export -------------------------------------------------------------------------


def test_runs_json_lists_the_run(trained):
    code, out, _ = run_main("runs", "--json", "--store", trained.store)
    assert code == 0
    [run] = json.loads(out)
    assert run["id"] == trained.run_id
    assert (run["name"], run["status"], run["optimizer"]) == ("cli run", "completed", "adamw")
    assert (run["step"], run["total_steps"]) == (30, 30)
    created = datetime.fromisoformat(run["created"])
    assert created.tzinfo == UTC and abs(created.timestamp() - time.time()) < 600
    assert 0 <= run["final_metrics"]["val_accuracy"] <= 1
    assert run["config"]["model"] == "mlp"


def test_runs_table(trained):
    code, out, _ = run_main("runs", "--store", trained.store)
    assert code == 0
    header, row = out.splitlines()
    assert header.split()[:5] == ["ID", "STATUS", "OPTIMIZER", "STEP", "VAL"]
    assert row.split()[:4] == [trained.run_id, "completed", "adamw", "30/30"]


def test_export_csv_and_tensorboard(trained, tmp_path):
    csv_path, tb = tmp_path / "run.csv", tmp_path / "tb"
    code, out, err = run_main(
        "export", trained.run_id, "--store", trained.store, "--csv", csv_path, "--tensorboard", tb
    )
    assert code == 0, err
    assert f"wrote {csv_path} (6 rows)" in out

    with csv_path.open(newline="") as file:
        header, *rows = list(csv.reader(file))
    assert header[:9] == ["step", *LEADING_COLUMNS]
    grouped = [i for i, key in enumerate(header) if "/" in key]
    assert grouped == list(range(grouped[0], len(header)))  # per-layer series come last
    kinds = [header[i].split("/")[0] for i in grouped]
    assert kinds == sorted(kinds, key=kinds.index)  # and each kind together
    with Store(trained.store) as store:
        metrics = store.read_metrics(trained.run_id)
    assert [int(row[0]) for row in rows] == metrics.steps.tolist() == [5, 10, 15, 20, 25, 30]

    accumulator = EventAccumulator(str(tb / trained.run_id), size_guidance={"scalars": 0})
    accumulator.Reload()
    assert [p.step for p in accumulator.Scalars("loss")] == [5, 10, 15, 20, 25, 30]
    assert "step_norm/dense1" in accumulator.Tags()["scalars"]
    code, _, err = run_main("export", trained.run_id, "--store", trained.store, "--tensorboard", tb)
    assert code == 2
    assert re.match(r"error: tensorboard: \S+ already holds event files", err)


def test_the_tensorboard_export_holds_every_layers_histograms(tmp_path):
    store, tb = tmp_path / "lab.sqlite", tmp_path / "tb"
    flags = [*SHORT_RUN, "--histogram-every", "10"]  # the last flag given wins
    code, out, err = run_main("train", "--store", store, *flags)
    assert code == 0, err
    run_id = out.split("\n")[0]
    assert run_main("export", run_id, "--store", store, "--tensorboard", tb)[0] == 0
    accumulator = EventAccumulator(str(tb / run_id), size_guidance={"histograms": 0})
    accumulator.Reload()
    with Store(store) as opened:
        measured = [e for e in opened.events(run_id) if e.kind == HISTOGRAM_EVENT]
    assert [e.step for e in measured] == [10, 20, 30]
    layers = measured[0].payload["grad"].keys()
    assert set(accumulator.Tags()["histograms"]) == {
        f"histogram/{kind}/{layer}" for kind in ("grad", "weight") for layer in layers
    }
    for kind in ("grad", "weight"):
        for layer in layers:
            read = accumulator.Histograms(f"histogram/{kind}/{layer}")
            assert [h.step for h in read] == [e.step for e in measured]
            for histogram, event in zip(read, measured, strict=True):
                value = histogram.histogram_value
                assert list(value.bucket) == event.payload[kind][layer]
                assert list(value.bucket_limit) == event.payload["edges"][1:]
                assert value.num == sum(event.payload[kind][layer]) > 0


def test_landscape_computes_once_then_reads_and_names_a_missing_checkpoint(trained):
    args = ("landscape", trained.run_id, "--store", trained.store)
    code, out, err = run_main(*args)
    assert code == 0, err
    lines = out.splitlines()
    assert re.fullmatch(r"loss at the centre \(step 30\): \d+\.\d+(e-?\d+)?", lines[0])
    assert [line.split(":")[0] for line in lines[1:4]] == [
        "along the update",
        "along a random direction",
        "over the plane",
    ]
    path = Path(lines[-1].removeprefix("kept at "))
    assert path.name == "step-30.landscape.npz" and path.exists()
    written = path.stat().st_mtime_ns
    again = run_main(*args)
    assert again[0] == 0 and again[1] == out and path.stat().st_mtime_ns == written
    code, out, err = run_main(*args, "--step", "7")
    assert (code, out) == (2, "")
    assert err == f"error: checkpoint: run {trained.run_id} has no checkpoint of step 7\n"
    assert run_main("landscape", "0000-nope", "--store", trained.store)[0] == 2


def test_export_of_an_unknown_run_exits_2(trained, tmp_path):
    code, out, err = run_main(
        "export", "0000-nope", "--store", trained.store, "--csv", tmp_path / "x.csv"
    )
    assert (code, out) == (2, "")
    assert err == f"error: run_id: no run '0000-nope' in {trained.store}\n"
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("command", [["runs"], ["export", "r1", "--csv", "x.csv"]])
def test_a_missing_store_is_not_created(tmp_path, command):
    store = tmp_path / "lab.sqlite"
    code, _, err = run_main(*command, "--store", store)
    assert code == 2
    assert err == f"error: no store at {store}\n"
    assert not store.exists()


def test_a_corrupt_store_exits_2_and_is_left_unchanged(tmp_path):
    store = tmp_path / "lab.sqlite"
    garbage = os.urandom(8192)
    store.write_bytes(garbage)
    for command in (["runs"], ["train", *SHORT_RUN], ["export", "r1", "--csv", "x.csv"]):
        code, out, err = run_main(*command, "--store", store)
        assert (code, out) == (2, "")
        [line] = err.splitlines()
        assert line.startswith(f"error: {store} is not a SQLite database")
    assert store.read_bytes() == garbage
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lab.sqlite"]


# Real processes --------------------------------------------------------------------------


def test_process_exits_2_on_a_bad_flag_without_creating_the_store(tmp_path):
    store = tmp_path / "env.sqlite"  # the default store, from the environment
    child = spawn(tmp_path, "train", "--lr", "-1", env={"OPTLAB_STORE": str(store)})
    out, _ = child.communicate(timeout=scaled(120))
    assert child.returncode == 2
    assert out == ""
    stderr = (tmp_path / "stderr.txt").read_text()
    assert error_lines(stderr) == ["error: learning_rate: must be in (0, 100] (got -1.0)"]
    assert not store.exists()


def test_process_exits_2_on_a_corrupt_store_and_leaves_it(tmp_path):
    store = tmp_path / "lab.sqlite"
    garbage = os.urandom(8192)
    store.write_bytes(garbage)
    child = spawn(tmp_path, "runs", "--json", "--store", store)
    out, _ = child.communicate(timeout=scaled(120))
    assert (child.returncode, out) == (2, "")
    [line] = error_lines((tmp_path / "stderr.txt").read_text())
    assert "is not a SQLite database" in line
    assert store.read_bytes() == garbage


@pytest.mark.skipif(
    signal.getsignal(signal.SIGINT) is signal.SIG_IGN,
    reason="SIGINT is ignored here (a background job), so the child would ignore it too",
)
def test_ctrl_c_stops_the_run_and_exits_130(tmp_path):
    store_path = tmp_path / "lab.sqlite"
    child = spawn(
        tmp_path, "train", "--store", store_path, "--model", "mlp", "--epochs", "10000",
        "--max-steps", "100000",
    )  # fmt: skip
    try:
        run_id = child.stdout.readline().strip()
        with Store(store_path) as store:
            wait_for(lambda: stored_last_step(store, run_id) >= 20, 60, "20 steps stored")
        child.send_signal(signal.SIGINT)
        out, _ = child.communicate(timeout=scaled(60))
    finally:
        child.kill()
    assert child.returncode == 130
    assert f"run {run_id} stopped:" in out
    with Store(store_path) as store:
        record = store.get_run(run_id)
    assert record.status == "stopped"
    assert record.step < 100_000


def test_train_on_a_file_of_ones_own(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 4)).astype("float32")
    y = (x[:, 0] > x[:, 1]).astype("int64")
    rows = "\n".join(",".join(map(str, [*row, label])) for row, label in zip(x, y, strict=True))
    (tmp_path / "mine.csv").write_text("a,b,c,d,label\n" + rows)
    store = tmp_path / "lab.sqlite"
    code, _, err = run_main(
        "train", "--store", store, "--dataset", f"csv:{tmp_path / 'mine.csv'}",
        "--model", "mlp", "--batch-size", "32", "--max-steps", "40", "--val-every", "20",
    )  # fmt: skip
    assert code == 0, err
    with Store(store) as opened:
        (record,) = opened.list_runs()
    assert record.config["dataset"] == f"csv:{tmp_path / 'mine.csv'}"
    assert record.final_metrics["val_accuracy"] > 0.8  # it learnt the file's rule
    code, _, err = run_main("train", "--store", store, "--dataset", f"npz:{tmp_path / 'no.npz'}")
    assert code == 2 and "dataset: cannot read" in err


def test_the_example_plugins_train_and_are_listed_with_their_description(tmp_path):
    """`plugins/tiny_vit.py` and `plugins/wine_tabular.py`: listed by `catalog`, trained by
    `train`, the ViT with a layer rule that freezes its embeddings (its layers are named
    for such rules)."""
    code, out, _ = run_main("catalog")
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert (
        "A tiny Vision Transformer" in lines["tiny_vit"]
        and "[plugin: tiny_vit.py]" in (lines["tiny_vit"])
    )
    assert "142 train / 36 test" in lines["wine"] and "plugin: wine_tabular.py" in lines["wine"]
    assert "[plugin" not in lines["lenet"] and "adamw" in lines
    store = tmp_path / "lab.sqlite"
    code, _, err = run_main(
        "train", "--store", store, "--model", "tiny_vit", "--dataset", "digits",
        "--max-steps", "4", "--layer-rule", "embedding:0",
    )  # fmt: skip
    assert code == 0, err
    code, _, err = run_main(
        "train", "--store", store, "--model", "mlp", "--dataset", "wine", "--lr", "0.01",
        "--epochs", "20", "--batch-size", "32",
    )  # fmt: skip
    assert code == 0, err
    with Store(store) as opened:
        vit, wine = sorted(opened.list_runs(), key=lambda run: run.config["model"], reverse=True)
        steps = opened.read_metrics(vit.id)
    assert vit.config["model"] == "tiny_vit" and wine.config["dataset"] == "wine"
    per_layer = ~np.isnan(steps["step_norm/block1_attention/query"])  # the budget's steps
    assert per_layer[0] and per_layer[-1]  # the first and the last step have them
    for frozen in ("patch_embedding", "position_embedding"):
        assert not steps[f"step_norm/{frozen}"][per_layer].any()
    assert (steps["step_norm/block1_attention/query"][per_layer] > 0).all()
    assert wine.final_metrics["val_accuracy"] > 0.9  # the cultivars part well
    code, _, err = run_main("train", "--store", store, "--model", "tiny_vit", "--dataset", "wine")
    assert code == 2 and "model: tiny_vit needs images; wine has examples of shape (13,)" in err


def test_a_regression_dataset_trains_on_the_squared_error_and_reports_the_absolute(tmp_path):
    """`plugins/diabetes_regression.py`: a regression, chosen by the dataset."""
    code, out, _ = run_main("catalog")
    assert "a regression" in next(line for line in out.splitlines() if "diabetes" in line)
    store = tmp_path / "lab.sqlite"
    code, out, err = run_main(
        "train", "--store", store, "--model", "mlp", "--dataset", "diabetes", "--lr", "0.003",
        "--epochs", "12", "--batch-size", "32", "--val-every", "11",
    )  # fmt: skip
    assert code == 0, err
    with Store(store) as opened:
        (run,) = opened.list_runs()
        metrics = opened.read_metrics(run.id)
    final = run.final_metrics
    assert "accuracy" not in metrics and "val_accuracy" not in final
    validated = metrics["val_mae"][np.isfinite(metrics["val_mae"])]
    from core import data

    # It learnt: better than predicting the training mean (0 once standardized).
    baseline = float(np.abs(data.load("diabetes").y_test).mean())
    assert validated.min() < 0.85 * baseline
    assert final["best_val_mae"] == pytest.approx(validated.min())
    # The training loss is the squared error: its mean is at least the squared mean error.
    assert (metrics["loss"] >= metrics["mae"] ** 2 - 1e-6).all()
    assert "best_val_mae" in out
    code, _, err = run_main(
        "train", "--store", store, "--dataset", "diabetes", "--model", "mlp", "--multitask"
    )
    assert code == 2 and "multitask: needs a classification" in err


def test_set_pause_resume_and_stop_steer_a_run_of_another_process(tmp_path):
    store_path = tmp_path / "lab.sqlite"
    child = spawn(
        tmp_path, "train", "--store", store_path, "--model", "mlp", "--optimizer", "adamw",
        "--epochs", "10000", "--max-steps", "100000", "--log-every", "1",
    )  # fmt: skip
    try:
        run_id = child.stdout.readline().strip()
        with Store(store_path) as store:
            wait_for(lambda: stored_last_step(store, run_id) >= 5, 60, "no steps stored")
        assert run_main("set", "--store", store_path, run_id)[0] == 2  # no knob given
        code, _, err = run_main("set", "--store", store_path, run_id, "--lr", "-1")
        assert code == 2 and "learning_rate" in err
        code, out, err = run_main(
            "set", "--store", store_path, run_id, "--lr", "0.05", "--weight-decay", "0.01"
        )
        assert code == 0, err
        assert re.fullmatch(
            rf"run {run_id}: learning_rate → 0.05, weight_decay → 0.01 \(taken at step \d+\)\n",
            out,
        )
        code, out, err = run_main("pause", "--store", store_path, run_id)
        assert code == 0, err
        with Store(store_path) as store:
            wait_for(lambda: store.get_run(run_id).status == "paused", 30, "not paused")
        assert run_main("resume", "--store", store_path, run_id)[0] == 0
        code, _, err = run_main("pause", "--store", store_path, run_id, "--at-step", "-1")
        assert code == 2 and "at_step" in err
        with Store(store_path) as store:
            at = stored_last_step(store, run_id) + 200
        code, out, err = run_main("pause", "--store", store_path, run_id, "--at-step", str(at))
        assert code == 0 and f"run {run_id}: pauses at step {at}" in out, err
        with Store(store_path) as store:
            # The second pause of the run: the first was the plain one above.
            wait_for(
                lambda: [e.step for e in store.events(run_id, "paused")][1:] == [at],
                60,
                f"no pause at step {at}",
            )
            assert store.get_run(run_id).status == "paused"
            assert at in {c.step for c in RunCheckpoints(store.checkpoint_folder(run_id)).list()}
        assert run_main("resume", "--store", store_path, run_id)[0] == 0
        code, out, err = run_main("stop", "--store", store_path, run_id)
        assert code == 0, err
        child.communicate(timeout=scaled(60))
    finally:
        child.kill()
    with Store(store_path) as store:
        assert store.get_run(run_id).status == "stopped"
        # Taken at the first step after the command: after the pause, if it came first.
        changes = [e.payload for e in store.events(run_id, "knob")]
    assert {(c["name"], c["value"]) for c in changes} == {
        ("learning_rate", 0.05),
        ("weight_decay", 0.01),
    }
    code, _, err = run_main("stop", "--store", store_path, run_id)
    assert code == 2 and f"run {run_id} has ended" in err
    code, _, err = run_main("pause", "--store", store_path, "0000-nope")
    assert code == 2 and "run_id: no run '0000-nope'" in err


@pytest.mark.slow
def test_sigkill_loses_at_most_the_last_second_of_metrics(tmp_path):
    """SIGKILL a training process: the run is then `interrupted`, its metrics reach to
    within about a second of the kill (the writer commits every 0.5 s), and the file is
    intact."""
    store_path = tmp_path / "lab.sqlite"
    child = spawn(
        tmp_path, "train", "--store", store_path, "--model", "mlp", "--epochs", "10000",
        "--max-steps", "100000", "--log-every", "1",
    )  # fmt: skip
    try:
        run_id = child.stdout.readline().strip()
        commits = []  # (when first seen, last stored step), one per commit seen
        with Store(store_path) as store:

            def commits_over(seconds: float) -> bool:
                step = stored_last_step(store, run_id)
                if step and (not commits or step > commits[-1][1]):
                    commits.append((time.monotonic(), step))
                # The speed is measured from the second commit to the last: three at least
                # (a loaded machine's two can be more than three seconds apart).
                return len(commits) >= 3 and commits[-1][0] - commits[0][0] >= seconds

            # Three seconds of commits, to measure the child's speed; it ends at a commit.
            wait_for(lambda: commits_over(3.0), 90, "three seconds of commits", interval=0.01)
        # Just before the next commit is due, when the most is in memory only.
        wait_for_moment(commits[-1][0] + 0.45)
        child.kill()
        killed_at = time.monotonic()
        child.wait(timeout=scaled(30))
    finally:
        child.kill()

    (first_seen, first_step), (last_seen, last_step) = commits[1], commits[-1]
    speed = (last_step - first_step) / (last_seen - first_seen)  # steps per second
    # The child's step at the kill: the last commit seen plus the steps since then.
    at_kill = last_step + speed * (killed_at - last_seen)

    engine = Engine(store_path)
    try:
        assert engine.interrupted_at_start == [run_id]
        assert engine.status(run_id).status == "interrupted"
        stored = engine.metrics(run_id)
    finally:
        engine.close()
    assert stored.steps.tolist() == list(range(1, stored.last_step + 1))  # no gaps
    assert stored.last_step >= last_step
    lost_steps = max(at_kill - stored.last_step, 0.0)
    lost_seconds = lost_steps / speed
    print(
        f"\nSIGKILL at ~step {at_kill:.0f} ({speed:.0f} steps/s): {stored.last_step} steps "
        f"stored, ~{lost_steps:.0f} steps ({lost_seconds:.2f} s) lost"
    )
    assert lost_seconds <= 1.0
    with contextlib.closing(sqlite3.connect(store_path)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# The optlab command -----------------------------------------------------------------------


def test_optlab_answers_help_from_any_folder_without_tensorflow(tmp_path):
    """`optlab` (installed into the venv by make) is `python -m core` from any folder; its
    help never imports TensorFlow (what took seconds and printed its start-up lines)."""
    optlab = Path(sys.executable).parent / "optlab"
    assert optlab.exists(), "make installs the project into .venv (pip install -e .)"
    for command in ([], ["train"], ["runs"], ["serve"]):
        started = time.monotonic()
        done = subprocess.run(
            [str(optlab), *command, "--help"], cwd=tmp_path, capture_output=True, text=True
        )
        print(f"optlab {' '.join(command)} --help: {time.monotonic() - started:.2f} s")
        assert done.returncode == 0 and done.stderr == ""
        assert done.stdout.startswith(f"usage: optlab {' '.join(command)}".rstrip())
    probe = (
        "import sys; from core.cli import main; main(['train', '--help']); "
        "print('tensorflow' in sys.modules, file=sys.stderr)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=Path(__file__).parents[2], capture_output=True, text=True
    )
    assert done.stderr.strip() == "False"


@pytest.mark.parametrize("log_level", [None, "2"])
def test_a_commands_engine_opens_with_the_training_stack_loaded(tmp_path, log_level) -> None:
    """Whether or not `TF_CPP_MIN_LOG_LEVEL` is set: a sweep's first trial, asked of
    Optuna, waited 4.6 s for the engine's warm-up to import the stack when it was."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env |= {"TF_CPP_MIN_LOG_LEVEL": log_level} if log_level else {}
    probe = (
        "import argparse, sys; from core.cli.opening import open_engine; "
        f"args = argparse.Namespace(store={str(tmp_path / 'lab.sqlite')!r}, ray_address=None); "
        "engine = open_engine(args, max_concurrent=1, must_exist=False); "
        "print(sorted({'keras', 'core.training.trainer'} & set(sys.modules))); engine.close()"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "['core.training.trainer', 'keras']"


@pytest.mark.parametrize("runs_at_once", [1, 3])
def test_a_commands_engine_sets_the_thread_pools_its_runs_at_once_need(
    tmp_path, runs_at_once
) -> None:
    """`optlab sweep --parallel 3` (or `optlab recipes`) on 2 cores trains with one thread
    an op, as the dashboard's engine does; one run keeps TensorFlow's defaults."""
    unset = (threads.INTRA_OP, threads.INTER_OP)
    env = {k: v for k, v in os.environ.items() if k not in unset}
    probe = (
        "import argparse, os; from core.cli.opening import open_engine; "
        "from core.training import threads; threads.available_cores = lambda: 2; "
        f"args = argparse.Namespace(store={str(tmp_path / 'lab.sqlite')!r}, ray_address=None); "
        f"engine = open_engine(args, max_concurrent={runs_at_once}, must_exist=False); "
        f"print({{k: os.environ[k] for k in {unset!r} if k in os.environ}}); engine.close()"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == str(threads.pool_sizes(runs_at_once, 2))


def test_bad_input_is_refused_before_tensorflow_loads_and_training_prints_none_of_its_logs(
    tmp_path,
):
    """A bad flag's error comes without importing TensorFlow (it came after 6 s of it);
    a good run's terminal shows the progress and none of TensorFlow's native start-up
    lines, which `TF_CPP_MIN_LOG_LEVEL` (unset here, as in a user's shell) would quiet."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    store = tmp_path / "lab.sqlite"
    probe = (
        f"import sys; from core.cli import main; main(['train', '--store', {str(store)!r}, "
        "'--lr', '-1']); print('tensorflow' in sys.modules, file=sys.stderr)"
    )
    refused = subprocess.run(
        [sys.executable, "-c", probe], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True
    )
    assert refused.stderr.splitlines() == [
        "error: learning_rate: must be in (0, 100] (got -1.0)",
        "False",
    ]
    assert not store.exists()

    trained = subprocess.run(
        [sys.executable, "-m", "core", "train", "--store", str(store), *SHORT_RUN],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert trained.returncode == 0, trained.stderr
    assert "completed" in trained.stderr
    native = ("I0000", "E0000", "W0000", "WARNING: All log messages", "oneDNN", "cuda")
    assert not [line for line in trained.stderr.splitlines() if line.startswith(native)]


def test_a_command_that_imports_tensorflow_on_its_own_prints_none_of_its_start_up_lines(
    trained, tmp_path
):
    """`export --tensorboard` imports TensorFlow outside a training engine; `landscape`,
    `export --model` and `serve` load the training stack (`tf_import.load`) and then run
    its ops. Each printed TensorFlow's start-up lines, and on a machine without an NVIDIA
    driver "failed call to cuInit" as an error at its first op, with `TF_CPP_MIN_LOG_LEVEL`
    unset (as in a user's shell)."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    exported = ["--store", str(trained.store), "--tensorboard", str(tmp_path / "events")]
    commands = [
        ["-m", "core", "export", trained.run_id, *exported],
        [
            "-c",
            "from core.training import tf_import; tf_import.load(); "
            "import tensorflow as tf; print(float(tf.constant(1.0) + 1))",
        ],
    ]
    for command in commands:
        done = subprocess.run(
            [sys.executable, *command],
            cwd=PROJECT_ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        assert "cuInit" not in done.stderr
        assert done.stderr == ""


def test_tensorflows_start_up_lines_are_told_from_real_errors():
    """What `tf_import` drops of what TensorFlow writes while it is imported, and keeps."""
    from core.training.tf_import import start_up_line

    cuinit = (
        "E0000 00:00:1796612383.238650   23942 cuda_platform.cc:52] failed call to cuInit: "
        "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)\n"
    )
    noise = [
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n",
        "I0000 00:00:1796612370.038877   23018 port.cc:153] oneDNN custom operations are on.\n",
        "I0000 00:00:1796612370.039643   23018 cudart_stub.cc:31] Could not find cuda drivers "
        "on your machine, GPU will not be used.\n",
        "To enable the following instructions: AVX2 FMA, in other operations, rebuild "
        "TensorFlow with the appropriate compiler flags.\n",
    ]
    assert all(start_up_line(line, nvidia_driver=False) for line in [*noise, cuinit])
    assert start_up_line(noise[1], nvidia_driver=True)
    assert not start_up_line(cuinit, nvidia_driver=True)  # with a driver: a real error
    real = [
        "E0000 00:00:1796612383.238650   23942 some_op.cc:12] Could not load libcudnn\n",
        "W0000 00:00:1796612383.238650   23942 gpu_device.cc:2] Cannot dlopen some GPU libraries\n",
        "Traceback (most recent call last):\n",
        "ImportError: libstdc++.so.6: version `GLIBCXX_3.4.30' not found\n",
    ]
    assert not any(start_up_line(line, nvidia_driver=False) for line in real)


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path):
    """`runs --json | head -1` on a store whose listing is larger than a pipe holds: the
    CLI stops quietly when `head` closes the pipe (it printed a BrokenPipeError)."""
    store = tmp_path / "lab.sqlite"
    with Store(store) as opened:
        for i in range(300):
            opened.create_run(f"r{i:03d}", "x" * 200, {"optimizer": "sgd", "note": "y" * 500})
    done = subprocess.run(
        f"{sys.executable} -m core runs --json --store {store} | head -1",
        shell=True,
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
    )
    assert done.stdout == "[\n" and done.stderr == ""


def test_numbers_with_separators_are_refused(tmp_path):
    code, out, err = run_main("train", "--store", tmp_path / "s.sqlite", "--epochs", "1_0")
    assert (code, out) == (2, "")
    assert error_lines(err) == ["error: epochs: must be a number (got '1_0')"]
    assert not (tmp_path / "s.sqlite").exists()


def test_resume_fork_and_delete(tmp_path):
    store_path = tmp_path / "lab.sqlite"
    engine = Engine(store_path)
    config = {"model": "mlp", "dataset": "digits", "max_steps": 60, "checkpoint_every": 10}
    run_id = engine.start(config)
    wait_for(lambda: engine.status(run_id).step >= 15, 60, "step 15")
    engine.stop(run_id)
    stopped_at = engine.wait(run_id, scaled(60)).step
    engine.close()

    code, out, err = run_main("resume", "--store", store_path, run_id)
    assert code == 0, err
    assert out.startswith(f"{run_id}\nrun {run_id} completed: 60/60 steps")
    code, _, err = run_main("resume", "--store", store_path, run_id)
    assert code == 2 and error_lines(err) == [
        f"error: run_id: run {run_id} is completed: nothing to resume"
    ]

    code, out, err = run_main(
        "fork", "--store", store_path, run_id, "--step", 50, "--lr", 0.5, "--max-steps", 80
    )
    assert code == 0, err
    fork_id = out.split("\n")[0]
    assert RUN_ID.match(fork_id) and f"run {fork_id} completed: 80/80 steps" in out
    code, out, _ = run_main("runs", "--store", store_path, "--json")
    listed = {run["id"]: run for run in json.loads(out)}
    assert (listed[fork_id]["parent"], listed[fork_id]["forked_at"]) == (run_id, 50)
    assert listed[fork_id]["config"]["hyperparameters"]["learning_rate"] == 0.5
    assert listed[run_id]["parent"] is None and 50 in listed[run_id]["checkpoints"]
    assert listed[fork_id]["checkpoints"][-1] == 80 and listed[fork_id]["checkpoint_bytes"] > 0
    with Store(store_path) as store:
        assert store.read_metrics(fork_id).steps[0] == 51
        assert store.read_metrics(run_id).steps.tolist() == list(range(1, 61))
        assert [e.step for e in store.events(run_id) if e.kind == "restored"] == [stopped_at]

    code, _, err = run_main("fork", "--store", store_path, run_id, "--step", 51, "--model", "lenet")
    assert code == 2
    (line,) = error_lines(err)
    assert "step: run" in line and "no checkpoint of step 51" in line and "model: a fork" in line

    code, out, _ = run_main("delete", "--store", store_path, fork_id)
    assert code == 0 and out.startswith(f"deleted {fork_id}")
    with Store(store_path) as store:
        assert not store.checkpoint_folder(fork_id).exists()
        assert [run.id for run in store.list_runs()] == [run_id]


LOAD_AND_TRAIN = """
import json, sys
import numpy as np
from core import data, optimizers

model = optimizers.load_model(sys.argv[1])
x, y = data.load("digits").split("test")
_, accuracy = model.evaluate(x, y, verbose=0)
optimizer = model.optimizer
before = int(optimizer.iterations.numpy())
history = model.fit(x[:128], y[:128], batch_size=64, epochs=1, verbose=0)
print(json.dumps({
    "optimizer": type(optimizer).__name__,
    "radius": optimizer.get_knob("radius"),
    "iterations": [before, int(optimizer.iterations.numpy())],
    "accuracy": accuracy,
    "loss": history.history["loss"][0],
    "engine": "core.engine" in sys.modules,
}))
"""


def test_export_writes_a_model_that_loads_and_trains_on(tmp_path):
    store = tmp_path / "lab.sqlite"
    code, out, err = run_main(
        "train", "--store", store, "--model", "mlp", "--dataset", "digits", "--epochs", 2,
        "--checkpoint-every", 22, "--radius", 30, "--optimizer", "adamw",
    )  # fmt: skip
    assert code == 0, err
    run_id = out.split("\n")[0]
    with Store(store) as opened:
        final = opened.get_run(run_id).final_metrics
        validated = opened.read_metrics(run_id)
    assert final["steps"] == 44
    last, best = tmp_path / "last.keras", tmp_path / "best.keras"
    code, out, err = run_main("export", "--store", store, run_id, "--model", last)
    assert code == 0 and out.strip() == f"wrote {last} (the model at step 44)", err
    code, out, _ = run_main(
        "export", "--store", store, run_id, "--model", best, "--checkpoint", "best"
    )
    accuracies = dict(zip(validated.steps, validated["val_accuracy"], strict=True))
    best_step = max((22, 44), key=lambda step: (accuracies[step], step))
    assert out.strip() == f"wrote {best} (the model at step {best_step})"
    code, _, err = run_main("export", "--store", store, run_id, "--model", best, "--checkpoint", 7)
    assert code == 2 and "checkpoint: run" in err and "no '7' checkpoint" in err

    loaded = subprocess.run(
        [sys.executable, "-c", LOAD_AND_TRAIN, str(last)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=scaled(300),
    )
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    result = json.loads(loaded.stdout.strip().splitlines()[-1])
    assert result["optimizer"] == "Adam" and result["radius"] == 30.0
    assert result["iterations"] == [44, 46]  # it trains on from the run's step count
    assert result["accuracy"] == pytest.approx(final["val_accuracy"], abs=1e-6)
    assert math.isfinite(result["loss"]) and not result["engine"]


# Runs `python -m core ARGS` with a teardown hook that says when the interpreter's exit
# teardown runs: after a command that loaded TensorFlow it must not (see core/__main__.py).
AS_PYTHON_M_CORE = """
import atexit, runpy, sys
atexit.register(lambda: print("interpreter teardown", flush=True))
sys.argv = ["core", *sys.argv[1:]]
runpy.run_module("core", run_name="__main__", alter_sys=True)
"""


def test_a_command_that_loaded_tensorflow_exits_without_the_interpreters_teardown(
    tmp_path,
) -> None:
    """An engine whose run's batch iterator was still being let go of aborted at exit
    (status -6 after SIGTERM, "FATAL: exception not rethrown"); a command that loaded
    TensorFlow now leaves with its status and no teardown, and one that did not, as usual."""
    store = tmp_path / "lab.sqlite"
    train = ["train", "--store", store, "--model", "mlp", "--max-steps", 3, "--log-every", 1]
    for argv, tensorflow in ((train, True), (["runs", "--store", store], False)):
        done = subprocess.run(
            [sys.executable, "-c", AS_PYTHON_M_CORE, *map(str, argv)],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=scaled(120),
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert ("interpreter teardown" in done.stdout) is not tensorflow, argv
