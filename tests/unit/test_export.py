"""Tests of `core.export` (the CSV table, the TensorBoard event files) and `safe_path`."""

import csv
import datetime as dt
import io
import math

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from core.confined import safe_path
from core.escaping import spreadsheet_safe
from core.export import LEADING_COLUMNS, column_order, table_csv, write_csv, write_tensorboard
from core.store import Metrics, Store

LAYERS = ("conv1", "dense", "logits")


@pytest.fixture
def run(tmp_path):
    """A stored run with the shape of a real one: telemetry every step, validation every
    tenth, per-layer series, a knob that changes at step 25 and a key that starts late."""
    with Store(tmp_path / "lab.sqlite") as store:
        store.create_run("r1", "export test", {"optimizer": "sgd"})
        rng = np.random.default_rng(0)
        with store.metrics_writer("r1") as writer:
            for step in range(1, 42):
                row = {
                    "loss": 2.5 / step,
                    "accuracy": 1 - 1 / step,
                    "learning_rate": 0.1 if step < 25 else 0.05,
                    "grad_norm": float(rng.random()),
                    "grad_norm_clipped": float(rng.random()),
                    "clip_active": float(step % 2),
                    "param_norm": 10 + step / 3,
                    "epoch": step / 20,
                    "wall_time": 1.8e9 + step / 4,
                }
                for layer in LAYERS:
                    row[f"step_norm/{layer}"] = float(rng.random())
                    row[f"sparsity/{layer}"] = float(rng.random())
                if step >= 20:
                    row["radius"] = 5.0
                if step % 10 == 0:
                    row |= {"val_loss": 3.0 / step, "val_accuracy": 0.9}
                if step == 41:
                    row = {"val_loss": 0.05, "val_accuracy": 0.95}  # validation only
                writer.append(step, row)
        store.add_event("r1", 0, "init", {"layers": list(LAYERS)})
        store.add_event("r1", 25, "knob", {"name": "learning_rate", "value": 0.05, "previous": 0.1})
        yield store, store.read_metrics("r1")


def test_column_order_puts_leading_columns_first_then_plain_keys_then_groups():
    keys = [
        "loss",
        "step_norm/b",
        "zeta",
        "accuracy",
        "step_norm/a",
        "sparsity/b",
        "loss/digit",
        "alpha",
        "val_accuracy",
        "epoch",
        "sparsity/a",
    ]
    assert column_order(keys) == [
        "epoch",
        "loss",
        "accuracy",
        "val_accuracy",
        "alpha",
        "zeta",
        "step_norm/b",
        "step_norm/a",
        "sparsity/b",
        "sparsity/a",
        "loss/digit",
    ]


def test_csv_round_trips_every_value_and_leaves_missing_cells_empty(run, tmp_path):
    _, metrics = run
    path = write_csv(metrics, tmp_path / "out" / "run.csv")

    with path.open(newline="") as file:
        header, *rows = list(csv.reader(file))
    assert header[: len(LEADING_COLUMNS) + 1] == ["step", *LEADING_COLUMNS]
    assert header[9:] == [
        "clip_active",
        "learning_rate",
        "radius",
        "wall_time",
        *(f"step_norm/{layer}" for layer in LAYERS),
        *(f"sparsity/{layer}" for layer in LAYERS),
    ]
    assert len(rows) == len(metrics) == 41
    assert [int(row[0]) for row in rows] == metrics.steps.tolist()
    for column, key in enumerate(header[1:], start=1):
        for row, stored in zip(rows, metrics[key], strict=True):
            if math.isnan(stored):
                assert row[column] == ""
            else:
                assert float(row[column]) == stored  # exact, not approximate
    assert rows[0][header.index("val_loss")] == ""
    assert float(rows[9][header.index("val_loss")]) == 3.0 / 10
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_csv_of_a_run_without_metrics_has_only_the_header(tmp_path):
    path = write_csv(Metrics(), tmp_path / "empty.csv")
    assert path.read_text().splitlines() == ["step"]


def test_tensorboard_event_file_reads_back_with_every_scalar_and_event(run, tmp_path):
    store, metrics = run
    path = write_tensorboard(
        metrics, tmp_path / "tb" / "r1", events=store.events("r1"), config={"optimizer": "sgd"}
    )
    assert path.parent == tmp_path / "tb" / "r1" and "tfevents" in path.name

    accumulator = EventAccumulator(str(path.parent), size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    scalars = set(metrics.keys) - {"wall_time"}  # the points' times, not a scalar
    assert set(accumulator.Tags()["scalars"]) == scalars
    for key in scalars:
        logged = ~np.isnan(metrics[key])
        points = accumulator.Scalars(key)
        assert [p.step for p in points] == metrics.steps[logged].tolist()
        # simple_value is a float32: the stored float64 values, rounded to float32.
        np.testing.assert_array_equal(
            np.array([p.value for p in points], np.float32), metrics[key][logged].astype(np.float32)
        )
    assert [p.step for p in accumulator.Scalars("val_loss")] == [10, 20, 30, 40, 41]
    loss_times = [p.wall_time for p in accumulator.Scalars("val_loss")]
    assert loss_times == [1.8e9 + step / 4 for step in (10, 20, 30, 40, 40)]
    assert accumulator.Scalars("radius")[0].step == 20

    knob = accumulator.Tensors("events/knob")
    assert [event.step for event in knob] == [25]
    assert knob[0].tensor_proto.string_val == ["learning_rate: 0.1 → 0.05".encode()]
    assert [event.step for event in accumulator.Tensors("events/init")] == [0]
    assert b'"optimizer": "sgd"' in accumulator.Tensors("config")[0].tensor_proto.string_val[0]


def test_tensorboard_refuses_a_folder_that_already_holds_event_files(run, tmp_path):
    _, metrics = run
    write_tensorboard(metrics, tmp_path / "tb")
    with pytest.raises(FileExistsError, match="already holds event files"):
        write_tensorboard(metrics, tmp_path / "tb")
    assert len(list((tmp_path / "tb").iterdir())) == 1


def test_safe_path_keeps_names_inside_the_base(tmp_path):
    assert safe_path(tmp_path, "run.csv") == tmp_path.resolve() / "run.csv"
    assert safe_path(tmp_path / "new", "a/b.csv") == (tmp_path / "new" / "a" / "b.csv").resolve()


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("../x", r"must not contain '\.\.'"),
        ("a/../../x", r"must not contain '\.\.'"),
        ("/etc/x", "must be a relative path"),
        ("", "non-empty"),
        ("a\x00b", "NUL"),
        (".", "leads outside"),
    ],
)
def test_safe_path_refuses_names_that_leave_the_base(tmp_path, name, reason):
    with pytest.raises(ValueError, match=rf"^csv: .*{reason}"):
        safe_path(tmp_path, name, field="csv")


def test_safe_path_refuses_a_symlink_that_leads_outside(tmp_path):
    base, outside = tmp_path / "exports", tmp_path / "elsewhere"
    base.mkdir()
    outside.mkdir()
    (base / "link").symlink_to(outside)
    (base / "inside").symlink_to(base)
    with pytest.raises(ValueError, match=r"^run_id: 'link/x' leads outside"):
        safe_path(base, "link/x", field="run_id")
    assert safe_path(base, "inside/x") == base.resolve() / "x"


def test_planted_links_are_never_written_through(run, tmp_path) -> None:
    """A link planted where the export's temporary file or its target would be, pointing
    at a file to overwrite, leaves that file as it was."""
    _, metrics = run
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = tmp_path / "out"
    out.mkdir()
    # What the old exports wrote through: a fixed temporary name, and the target itself.
    (out / "run.csv.part").symlink_to(victim)
    (out / "run.csv").symlink_to(victim)
    (out / "tb").mkdir()
    (out / "tb" / "optlab-export.part").symlink_to(victim)
    write_csv(metrics, out / "run.csv")
    write_tensorboard(metrics, out / "tb")
    assert victim.read_text() == "keep me"
    assert not (out / "run.csv").is_symlink() and (out / "run.csv").read_text().startswith("step")


@pytest.mark.parametrize(
    "text", ["=1+2", "+1", "-x", "@SUM(1+1)", "\t=1", "\r=1", '=HYPERLINK("a")']
)
def test_text_that_begins_like_a_formula_is_made_text(text):
    assert spreadsheet_safe(text) == "'" + text


@pytest.mark.parametrize("value", [-0.5, -3, 0.0, None, True, "loss", "a=1", " =1", ""])
def test_numbers_and_other_text_pass_unchanged(value):
    assert spreadsheet_safe(value) is value


def test_a_pages_table_as_csv_keeps_numbers_and_makes_text_safe():
    when = dt.datetime(2026, 1, 2, 3, 4, 5)
    rows = [
        {"name": "=1+2", "tags": ["@SUM(1+1)", "x"], "value": -0.5, "created": when},
        {"name": "plain", "=key": float("nan"), "value": None},
    ]
    header, first, second = list(csv.reader(io.StringIO(table_csv(rows), newline="")))
    assert header == ["name", "tags", "value", "created", "'=key"]
    assert first == ["'=1+2", "'@SUM(1+1), x", "-0.5", "2026-01-02 03:04:05", ""]
    assert second == ["plain", "", "", "", ""]
