"""How metric rows are kept on disk: `metric_chunks` rows holding consecutive steps.

A chunk holds consecutive steps of one run as two blobs: the steps (int64) and a row-major
steps × keys matrix of float64, NaN where a key has no value at a step. Each flush of a
writer adds one chunk at level 0. Whenever a run's last `FANOUT` chunks have the same level
and keys and together at most `MAX_ROWS` rows, they are merged into one chunk of the next
level (as bytes: row-major matrices with equal keys just concatenate). A run of n rows so
keeps about n / MAX_ROWS + FANOUT · log_FANOUT(MAX_ROWS) chunks however slowly it logs, and
each row is rewritten at most log_FANOUT(MAX_ROWS) times.

A writer keeps the keys of its chunks growing only (a key, once seen, is a column of every
later chunk), so consecutive chunks mostly share their key list; reading concatenates the
blobs of such chunks and decodes each group with one `numpy.frombuffer`.
"""

import itertools
import json
import operator
from collections.abc import Sequence

import numpy as np

from core.store.connections import Connection
from core.store.metrics import Block

_STEP = np.dtype("<i8")
_VALUE = np.dtype("<f8")
_FIRST, _LAST = -(2**63), 2**63 - 1

#: How many chunks of one level are merged into one of the next.
FANOUT = 8
#: Chunks are not merged beyond this many rows (with 30 keys, about 1 MB of payload).
MAX_ROWS = 4096

Row = tuple[int, dict[str, float]]


class ChunkEncoder:
    """Turns a writer's buffered rows into blocks whose key list only ever grows."""

    def __init__(self) -> None:
        self._keys: dict[str, None] = {}  # every key seen so far, in order of appearance

    def encode(self, rows: Sequence[Row]) -> Block:
        """One block of `rows`, which must be in increasing step order."""
        keys = self._keys
        for _, values in rows:
            for key in values:
                if key not in keys:
                    keys[key] = None
        nan = float("nan")
        matrix = np.array([[values.get(key, nan) for key in keys] for _, values in rows], _VALUE)
        steps = np.fromiter((step for step, _ in rows), _STEP, len(rows))
        return Block(tuple(keys), steps, matrix.reshape(len(rows), len(keys)).T)


def append(conn: Connection, run_id: str, block: Block) -> None:
    """Store `block`, which must not be empty and must follow the run's last step."""
    keys = json.dumps(block.keys)
    steps = block.steps.astype(_STEP, copy=False).tobytes()
    # Row-major steps × keys, so that chunks with the same keys concatenate as bytes.
    payload = np.ascontiguousarray(block.columns.T, _VALUE).tobytes()
    first, last = int(block.steps[0]), int(block.steps[-1])
    _insert(conn, run_id, 0, first, last, len(block.steps), keys, steps, payload)
    while _merge_tail(conn, run_id):
        pass


def _insert(conn: Connection, run_id: str, *fields: object) -> None:
    conn.execute(
        "INSERT INTO metric_chunks"
        " (run_id, level, first_step, last_step, n_rows, keys, steps, payload)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (run_id, *fields),
    )


def _merge_tail(conn: Connection, run_id: str) -> bool:
    """Merge the run's last FANOUT chunks if they qualify; return whether it did."""
    tail = conn.execute(  # newest first
        "SELECT rowid, level, keys, n_rows FROM metric_chunks"
        " WHERE run_id = ? ORDER BY last_step DESC LIMIT ?",
        (run_id, FANOUT),
    ).fetchall()
    if (
        len(tail) < FANOUT
        or len({(level, keys) for _, level, keys, _ in tail}) > 1
        or sum(n_rows for *_, n_rows in tail) > MAX_ROWS
    ):
        return False
    rowids = [rowid for rowid, *_ in tail]
    marks = ", ".join("?" * len(rowids))
    parts = conn.execute(
        "SELECT first_step, last_step, n_rows, steps, payload FROM metric_chunks"
        f" WHERE rowid IN ({marks}) ORDER BY last_step",
        rowids,
    ).fetchall()
    first_steps, last_steps, counts, steps, payloads = zip(*parts, strict=True)
    conn.execute(f"DELETE FROM metric_chunks WHERE rowid IN ({marks})", rowids)
    _, level, keys, _ = tail[0]
    _insert(
        conn,
        run_id,
        level + 1,
        first_steps[0],
        last_steps[-1],
        sum(counts),
        keys,
        b"".join(steps),
        b"".join(payloads),
    )
    return True


def select(
    conn: Connection,
    run_id: str,
    since_step: int | None = None,
    *,
    until: int | None = None,
    limit: int | None = None,
) -> list[Block]:
    """Run `run_id`'s rows with step > `since_step` (all if None) and ≤ `until` (all if
    None), as blocks in step order; from the first `limit` chunks that hold such rows
    when given."""
    found = conn.execute(
        "SELECT keys, steps, payload FROM metric_chunks WHERE run_id = ? AND last_step > ?"
        " AND first_step <= ? ORDER BY last_step" + ("" if limit is None else f" LIMIT {limit:d}"),
        (
            run_id,
            _FIRST if since_step is None else since_step,
            _LAST if until is None else until,
        ),
    ).fetchall()
    blocks = []
    for keys_json, group in itertools.groupby(found, key=operator.itemgetter(0)):
        _, steps, payloads = zip(*group, strict=True)
        keys = tuple(json.loads(keys_json))
        step_array = np.frombuffer(b"".join(steps), _STEP)
        matrix = np.frombuffer(b"".join(payloads), _VALUE)
        blocks.append(Block(keys, step_array, matrix.reshape(len(step_array), len(keys)).T))
    if blocks:  # only the first and the last chunk can hold steps outside the range
        if since_step is not None:
            blocks[0] = blocks[0].after(since_step)
        if until is not None:
            blocks[-1] = blocks[-1].until(until)
    return blocks


def last_step(conn: Connection, run_id: str) -> int | None:
    """The largest stored step of run `run_id`, or None if it has no metrics."""
    return conn.execute(
        "SELECT max(last_step) FROM metric_chunks WHERE run_id = ?", (run_id,)
    ).fetchone()[0]


def truncate(conn: Connection, run_id: str, step: int) -> None:
    """Delete run `run_id`'s rows after `step`: the chunks that begin later, and the
    tail of the one chunk that holds `step` and later steps."""
    cut = conn.execute(
        "SELECT level, first_step, keys, steps, payload FROM metric_chunks"
        " WHERE run_id = ? AND first_step <= ? AND last_step > ?",
        (run_id, step, step),
    ).fetchone()
    conn.execute("DELETE FROM metric_chunks WHERE run_id = ? AND last_step > ?", (run_id, step))
    if cut is None:
        return
    level, first_step, keys, steps, payload = cut
    step_array = np.frombuffer(steps, _STEP)
    kept = int(np.searchsorted(step_array, step, side="right"))  # rows with step <= `step`
    row_bytes = len(json.loads(keys)) * _VALUE.itemsize
    last = int(step_array[kept - 1])
    _insert(
        conn,
        run_id,
        level,
        first_step,
        last,
        kept,
        keys,
        steps[: kept * _STEP.itemsize],
        payload[: kept * row_bytes],
    )
