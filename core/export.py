"""Exports of one run's metrics: a CSV table, and TensorBoard event files; and the pages'
tables as CSV.

    metrics = store.read_metrics(run_id)
    write_csv(metrics, "loss.csv")
    write_tensorboard(metrics, run_folder("tb", run_id), events=store.events(run_id))
    table_csv([{"name": run.name, "loss": 0.25} for run in runs])

Every CSV cell passes through `core.escaping.spreadsheet_safe`: a run's name, a tag or a
metric's key that begins like a formula is text in a spreadsheet, never a formula.

Where a user names the output and the caller confines exports to a folder,
`core.confined.safe_path` turns the name into a path that cannot lead out of it; a run id
becomes a folder only through `core.store.paths.run_folder`, and a run's name never does.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import os
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.escaping import spreadsheet_safe
from core.series import parsed
from core.store import HISTOGRAM_EVENT, KNOB_EVENT, Event, Metrics
from core.training import tf_import

#: The CSV's first columns after `step`, those a run logged, in this order.
LEADING_COLUMNS = (
    "epoch",
    "loss",
    "accuracy",
    "grad_norm",
    "grad_norm_clipped",
    "param_norm",
    "val_loss",
    "val_accuracy",
)


#: The series that holds when each step was logged (Unix seconds).
WALL_TIME = "wall_time"

#: What each kind of the histogram instrument counts the entries of.
HISTOGRAM_KINDS = {"grad": "gradient entries", "weight": "weights"}


def column_order(keys: Iterable[str]) -> list[str]:
    """The CSV's metric columns: `LEADING_COLUMNS`, the other keys of the whole run sorted,
    then the series of a layer, task or part (`step_norm/<layer>`, `loss/<task>`, …: see
    `core.series.SeriesKey`) grouped by their statistic.

    Groups come in the order their first key appears, and keys keep their order within a
    group: per-layer series stay in the model's layer order.
    """
    keys = list(dict.fromkeys(keys))
    leading = [key for key in LEADING_COLUMNS if key in keys]
    of_parts = {key: series for key, series in parsed(keys).items() if series.of is not None}
    plain = sorted(key for key in keys if key not in of_parts and key not in LEADING_COLUMNS)
    groups: dict[str, list[str]] = {}
    for key, series in of_parts.items():
        groups.setdefault(series.statistic, []).append(key)
    return leading + plain + [key for group in groups.values() for key in group]


def write_csv(metrics: Metrics, path: str | os.PathLike[str]) -> Path:
    """Writes `metrics` as a CSV table, one row per logged step, and returns its path.

    Columns: `step`, then `column_order(metrics.keys)`, each key made `spreadsheet_safe`
    (a key is any text the store took). A value the step did not log (NaN) is an empty
    cell; the others are numbers, written exactly (Python's shortest round-trip repr), so
    reading the file back gives the stored float64 values. The table is written to a
    new file next to `path` (see `_claim`) and renamed into place, so `path` never holds
    half a table, and nothing planted there is written through. Missing parent folders
    are created.
    """
    path = Path(path)
    columns = column_order(metrics.keys)
    table = _rows(metrics, columns)
    path.parent.mkdir(parents=True, exist_ok=True)
    part, descriptor = _claim(path)
    try:
        with os.fdopen(descriptor, "w", newline="", encoding="utf-8") as file:
            writer = csv.writer(file)
            writer.writerow(safe_cells(["step", *columns]))
            for step, values in zip(metrics.steps.tolist(), table, strict=True):
                writer.writerow([step, *(None if math.isnan(v) else v for v in values)])
        part.replace(path)
    finally:
        part.unlink(missing_ok=True)
    return path


def table_csv(rows: Sequence[Mapping[str, object]]) -> str:
    """`rows` (a page's table: one mapping a row, column to value) as CSV text, for a
    spreadsheet. A column for each key, in the order keys first appear; a row without
    one has an empty cell there, as has None or NaN. A list (a run's tags) is one cell,
    its items joined by commas; a time is written `YYYY-MM-DD HH:MM:SS`; numbers stay
    numbers; and every cell, the header's included, is made `spreadsheet_safe`."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(safe_cells(columns))
    for row in rows:
        writer.writerow(safe_cells(_plain(row.get(column)) for column in columns))
    return text.getvalue()


def safe_cells(cells: Iterable[object]) -> list[object]:
    """A CSV row's cells, each made `spreadsheet_safe`."""
    return [spreadsheet_safe(cell) for cell in cells]


def _plain(value: object) -> object:
    """A table's value as a CSV cell holds it: see `table_csv`."""
    if isinstance(value, list | tuple):
        return ", ".join(str(item) for item in value)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def write_tensorboard(
    metrics: Metrics,
    directory: str | os.PathLike[str],
    *,
    events: Iterable[Event] | None = None,
    config: Mapping[str, Any] | None = None,
) -> Path:
    """Writes `metrics` as a TensorBoard event file in `directory` and returns its path.

    Every series becomes a scalar tag of the same name, so `step_norm/<layer>` and the like
    group by their prefix in TensorBoard; NaN (not logged) points are left out. `events`
    (the store's events of the run) become text summaries tagged `events/<kind>` at their
    step, a knob change reading `name: previous → value`, except the histogram instrument's,
    which become TensorBoard histograms (see `histogram_summary`); `config`, if given,
    becomes a `config` text at step 0.

    A step's points carry the time it was logged, from the `wall_time` series (which is
    therefore no scalar of its own); a step without one takes the previous step's, and
    metrics without that series take the export time. Events keep the time they happened.
    The directory is created if missing, and refused
    (`FileExistsError`) if it already holds event files: TensorBoard would merge both
    exports into one run.
    """
    # TensorFlow only here: the C++ record writer is what makes a run of 100,000 logged
    # steps export in seconds, and the CSV export should not wait for the import. Imported
    # through `tf_import`, which keeps its start-up lines off the terminal.
    tf_import.tensorflow()
    import tensorflow as tf
    from tensorboard.compat.proto.event_pb2 import Event as EventProto
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.text.summary_v2 import text_pb

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if existing := sorted(p.name for p in directory.iterdir() if "tfevents" in p.name):
        raise FileExistsError(f"{directory} already holds event files: {existing[0]}")

    now = time.time()
    records: list[tuple[int, int, EventProto]] = []  # (step, order within the step, event)
    if config is not None:
        text = "```\n" + json.dumps(dict(config), indent=2, sort_keys=True, default=str) + "\n```"
        records.append((0, 0, EventProto(wall_time=now, step=0, summary=text_pb("config", text))))
    for event in events or ():
        if event.kind == HISTOGRAM_EVENT:
            summary = histogram_summary(event.payload)
        else:
            summary = text_pb(f"events/{event.kind}", describe_event(event))
        records.append(
            (event.step, 1, EventProto(wall_time=event.time, step=event.step, summary=summary))
        )
    keys = [key for key in metrics.keys if key != WALL_TIME]
    times = _wall_times(metrics, now)
    for step, when, values in zip(metrics.steps.tolist(), times, _rows(metrics, keys), strict=True):
        summary = Summary(
            value=[
                Summary.Value(tag=key, simple_value=value)
                for key, value in zip(keys, values, strict=True)
                if not math.isnan(value)
            ]
        )
        if summary.value:
            records.append((step, 2, EventProto(wall_time=when, step=step, summary=summary)))
    # In step order: TensorBoard drops a tag's later points when the tag's steps go back.
    records.sort(key=lambda record: record[:2])

    name = f"events.out.tfevents.{int(now)}.optlab"
    # TensorFlow's record writer opens the file by name: it gets one made exclusively,
    # under a random name ("tfevents" is not in it: TensorBoard skips it meanwhile).
    part, descriptor = _claim(directory / "optlab-export")
    os.close(descriptor)
    try:
        with tf.io.TFRecordWriter(str(part)) as writer:
            writer.write(
                EventProto(wall_time=now, file_version="brain.Event:2").SerializeToString()
            )
            for _, _, event in records:
                writer.write(event.SerializeToString())
        part.replace(directory / name)
    finally:
        part.unlink(missing_ok=True)
    return directory / name


def histogram_summary(histograms: Mapping[str, Any]) -> Any:
    """The histogram instrument's counts at one step (its event's payload: `edges` and,
    per kind, the counts of each layer) as a TensorBoard `Summary` of one histogram per
    kind and layer, tagged `histogram/<kind>/<layer>`, over the lab's own bins of log₁₀ of
    the entries' magnitudes (the first and last bins also hold what falls below and above
    them). A bin's entries are taken at its centre for the histogram's `sum` and
    `sum_squares`, which the instrument does not record."""
    from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata

    edges = np.asarray(histograms["edges"], np.float64)
    centres = (edges[:-1] + edges[1:]) / 2
    values = []
    for kind in sorted(k for k in histograms if k != "edges"):
        for layer, counts in histograms[kind].items():
            counts = np.asarray(counts, np.float64)
            proto = HistogramProto(
                min=edges[0],
                max=edges[-1],
                num=counts.sum(),
                sum=counts @ centres,
                sum_squares=counts @ centres**2,
                bucket_limit=edges[1:].tolist(),
                bucket=counts.tolist(),
            )
            about = f"log₁₀ of the magnitudes of {layer}'s {HISTOGRAM_KINDS.get(kind, kind)}"
            values.append(
                Summary.Value(
                    tag=f"histogram/{kind}/{layer}",
                    histo=proto,
                    metadata=SummaryMetadata(summary_description=about),
                )
            )
    return Summary(value=values)


def _claim(target: Path) -> tuple[Path, int]:
    """A new empty file beside `target`, to write and then rename onto it, and its open
    descriptor. It is created exclusively (`O_EXCL`) under a random name, never through a
    link (`O_NOFOLLOW`): a file or link planted next to `target` is never written through.
    The rename replaces `target` itself, even where `target` is a link."""
    while True:
        part = target.with_name(f".{target.name}.{secrets.token_hex(8)}.part")
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            return part, os.open(part, flags, 0o644)
        except FileExistsError:
            continue  # taken: draw another name


def _rows(metrics: Metrics, keys: list[str]) -> list[list[float]]:
    """The values of `keys` at each step, one list per step (Python floats: fast to loop)."""
    if not keys:
        return [[] for _ in range(len(metrics))]
    return np.vstack([metrics[key] for key in keys]).T.tolist()


def _wall_times(metrics: Metrics, default: float) -> list[float]:
    """When each step was logged: the `wall_time` series, gaps filled from the step
    before (validation-only rows have none), `default` before the first or without one."""
    if WALL_TIME not in metrics:
        return [default] * len(metrics)
    times, last = [], default
    for when in metrics[WALL_TIME].tolist():
        last = last if math.isnan(when) else when
        times.append(last)
    return times


def describe_event(event: Event) -> str:
    """One line for a run event: `name: previous → value` for a knob change, else the
    kind's payload as JSON (or just the kind when it has none)."""
    payload = event.payload
    if event.kind == KNOB_EVENT and {"name", "value"} <= payload.keys():
        return f"{payload['name']}: {payload.get('previous')} → {payload['value']}"
    return json.dumps(payload, sort_keys=True, default=str) if payload else event.kind
