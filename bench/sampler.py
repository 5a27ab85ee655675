"""A sampling profiler for one thread: which call of a given module's code it is in.

`cProfile` instruments every Python call, which slows TensorFlow's Python-heavy dispatch
several-fold and skews the shares; sampling does not. Every `interval` seconds a
background thread looks at the watched thread's stack, finds the innermost frame of the
anchor file (for the engine, its run loop in `core/engine/execution.py`) and charges the
time since the last look to the function that frame was calling (`Trainer.step`,
`Trainer.snapshot`, …), or to the anchor itself.

The sampler needs the GIL to look, and a thread running Python gives it up only every
"switch interval" (5 ms by default), so while sampling that interval is made a fifth of the
sampling interval; charging elapsed time rather than counting looks absorbs what is left.

Frames of the bench's own files are skipped, so the bench's wrappers (the clocked metrics
writer) are charged to what they wrap.

The sampler cannot look while C code holds the GIL without returning to Python; that time
is charged to wherever the thread is next seen. TensorFlow releases the GIL while its ops
run, so for the engine this only blurs short conversions such as `Tensor.numpy()`.
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
from pathlib import Path
from types import CodeType, FrameType

BENCH = Path(__file__).resolve().parent
# What the time spent in the anchor's own code, outside any call, is charged to.
ANCHOR_ITSELF = "the loop itself"
OUTSIDE = "elsewhere"


class StackSampler:
    """Samples one thread at a time; `seconds` holds the time charged to each call."""

    def __init__(self, anchor: str | os.PathLike[str], interval: float = 0.001) -> None:
        self.anchor = Path(anchor).resolve()
        self.interval = interval
        self.seconds: collections.Counter[str] = collections.Counter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._kinds: dict[CodeType, str] = {}  # code → "anchor", "bench" or "other"
        self._switch_interval = sys.getswitchinterval()

    def start(self, thread_id: int) -> None:
        """Starts sampling thread `thread_id` (e.g. `threading.get_ident()` in it), and
        shortens the process's switch interval until `stop`."""
        if self._thread is not None:
            raise RuntimeError("the sampler is already running")
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_interval, self.interval / 5))
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, args=(thread_id,), name="bench-sampler", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stops sampling and restores the switch interval; safe to call from the sampled
        thread."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread = None
        sys.setswitchinterval(self._switch_interval)

    def _run(self, thread_id: int) -> None:
        last = time.perf_counter()
        while not self._stop.wait(self.interval):
            frame = sys._current_frames().get(thread_id)
            now = time.perf_counter()
            if frame is None:
                return
            self.seconds[self._call_of(frame)] += now - last
            last = now

    def _call_of(self, frame: FrameType) -> str:
        """The function that the innermost anchor frame of the stack is calling."""
        callee: FrameType | None = None  # the outermost non-bench frame seen so far
        current: FrameType | None = frame
        while current is not None:  # from the innermost frame outwards
            kind = self._kind(current.f_code)
            if kind == "anchor":
                return callee.f_code.co_qualname if callee is not None else ANCHOR_ITSELF
            if kind == "other":
                callee = current
            current = current.f_back
        return OUTSIDE

    def _kind(self, code: CodeType) -> str:
        kind = self._kinds.get(code)
        if kind is None:
            path = Path(code.co_filename).resolve()
            if path == self.anchor:
                kind = "anchor"
            elif path.is_relative_to(BENCH):
                kind = "bench"
            else:
                kind = "other"
            self._kinds[code] = kind
        return kind
