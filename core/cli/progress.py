"""A run's progress in a terminal: a bar redrawn in place (or a line every few seconds in a
log), and the summary printed when the run ends (`follow` draws both)."""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Mapping
from typing import TextIO

import numpy as np

from core.cli.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, report
from core.engine import Engine, RunStatus
from core.engine.execution import BEST, FINAL_KEYS
from core.knobs import InvalidInput

POLL_SECONDS = 0.5  # progress redraws about twice a second
SUMMARY_KEYS = (*FINAL_KEYS, *(f"best_{key}" for key in BEST))


class RunWatch:
    """Follows one run of `engine`: polls it, draws `bar`, and returns when it ends."""

    def __init__(self, engine: Engine, run_id: str, bar: ProgressBar) -> None:
        self.engine = engine
        self.run_id = run_id
        self.bar = bar
        self.latest: dict[str, float] = {}  # last logged loss and validation accuracy
        self._since: int | None = None  # last step read, for incremental reads
        self._first: tuple[float, int] | None = None  # (time, step) when steps first showed

    def until_done(self) -> RunStatus:
        while True:
            status = self.engine.wait(self.run_id, POLL_SECONDS)
            self._read_new_metrics()
            if not status.active:
                self.bar.finish(status, self.latest, status.steps_per_second)
                return status
            self.bar.update(status, self.latest, self._speed(status.step))

    def _speed(self, step: int) -> float | None:
        """Steps per second since the first step showed (not counting model building)."""
        now = time.monotonic()
        if self._first is None:
            if step > 0:
                self._first = (now, step)
            return None
        started, first_step = self._first
        return (step - first_step) / (now - started) if step > first_step else None

    def _read_new_metrics(self) -> None:
        metrics = self.engine.metrics(self.run_id, since_step=self._since)
        if not len(metrics):
            return
        self._since = metrics.last_step
        for key in ("loss", "val_accuracy"):
            if key in metrics:
                logged = metrics[key][~np.isnan(metrics[key])]
                if logged.size:
                    self.latest[key] = float(logged[-1])


class ProgressBar:
    """A run's progress on `stream`: one line redrawn in place on a terminal; elsewhere
    (a log file, a pipe) a new line every `line_every` seconds, and one at the end."""

    def __init__(self, stream: TextIO, *, width: int = 24, line_every: float = 10.0) -> None:
        self.stream = stream
        self.width = width
        self.line_every = line_every
        self._tty = stream.isatty()
        self._shown = 0  # characters on the terminal's current line
        self._last_line = -math.inf  # when the last line was written (not a terminal)

    def update(self, status: RunStatus, latest: Mapping[str, float], speed: float | None) -> None:
        text = render_progress(status, latest, speed, self.width)
        if self._tty:
            self._redraw(text)
        elif time.monotonic() - self._last_line >= self.line_every:
            self._last_line = time.monotonic()
            self.stream.write(text + "\n")
        self.stream.flush()

    def finish(self, status: RunStatus, latest: Mapping[str, float], speed: float | None) -> None:
        """The last state, on a line of its own."""
        text = render_progress(status, latest, speed, self.width)
        if self._tty:
            self._redraw(text)
            text = ""
        self.stream.write(text + "\n")
        self.stream.flush()
        self._shown = 0

    def note(self, message: str) -> None:
        """A message on its own line, below the bar."""
        self.stream.write(("\n" if self._shown else "") + message + "\n")
        self.stream.flush()
        self._shown = 0

    def _redraw(self, text: str) -> None:
        self.stream.write("\r" + text.ljust(self._shown))  # blanks cover a longer old line
        self._shown = len(text)


def render_progress(
    status: RunStatus, latest: Mapping[str, float], speed: float | None, width: int = 24
) -> str:
    """One line: bar, step/total, percent, loss, val_accuracy, `speed` in steps/s, ETA, and
    the status unless running: `[####----]  31/62  50%  loss 0.41  …  12.3 steps/s  ETA 0:03`.
    """
    if status.step == 0 and status.status in ("queued", "running"):
        return f"{status.id}  starting"
    parts = []
    if status.total_steps:
        done = min(status.step / status.total_steps, 1.0)
        filled = round(done * width)
        parts.append("[" + "#" * filled + "-" * (width - filled) + "]")
        parts.append(f"{status.step}/{status.total_steps}  {done:4.0%}")
    else:
        parts.append(f"step {status.step}")
    if "loss" in latest:
        parts.append(f"loss {latest['loss']:.4g}")
    if "val_accuracy" in latest:
        parts.append(f"val_acc {latest['val_accuracy']:.4f}")
    if speed:
        parts.append(f"{speed:.1f} steps/s")
        if status.active and status.total_steps:
            parts.append(f"ETA {_duration((status.total_steps - status.step) / speed)}")
    if status.status != "running":
        parts.append(status.status)
    return "  ".join(parts)


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"


def format_summary(status: RunStatus) -> str:
    """The final report: `run ID STATUS: STEP/TOTAL steps in S s (R steps/s)`, then one
    line per final metric."""
    final = status.final_metrics or {}
    head = f"run {status.id} {status.status}: {status.step}/{status.total_steps or '?'} steps"
    if final.get("seconds") is not None:
        head += f" in {final['seconds']:.1f} s"
    if final.get("steps_per_second"):
        head += f" ({final['steps_per_second']:.1f} steps/s)"
    lines = [head]
    lines += [f"  {key:<18} {final[key]:.6g}" for key in SUMMARY_KEYS if key in final]
    return "\n".join(lines)


def failure(status: RunStatus) -> str:
    """Why a run did not complete, for the `error:` line."""
    final = status.final_metrics or {}
    if status.status == "diverged":
        loss = final.get("loss", float("nan"))
        return f"run {status.id} diverged: the loss was {loss:g} at step {final.get('diverged_at')}"
    if status.error:
        return f"run {status.id} {status.status}: {status.error}"
    return f"run {status.id} ended {status.status}"


# serve -----------------------------------------------------------------------------------


def follow(engine: Engine, run_id: str, summary: TextIO | None = None) -> int:
    """Draws the run's progress until it ends (Ctrl-C stops it), prints its summary to
    `summary` (default: stdout), and returns the exit status."""
    watch = RunWatch(engine, run_id, ProgressBar(sys.stderr))
    try:
        status = watch.until_done()
        interrupted = False
    except KeyboardInterrupt:
        watch.bar.note(f"stopping run {run_id} (Ctrl-C)")
        with contextlib.suppress(InvalidInput):  # it may have just ended
            engine.stop(run_id)
        status = watch.until_done()
        interrupted = True
    print(format_summary(status), file=summary or sys.stdout, flush=True)
    if interrupted:
        return EXIT_INTERRUPTED
    if status.status == "completed":
        return EXIT_OK
    report(failure(status))
    return EXIT_FAILED
