"""Where the machine's cores go while a figure trains: the CPU time of groups of
processes and the cores left idle, read from Linux's /proc over the windows a figure
times, as shares of one core."""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path


class CoreShares:
    """CPU seconds of each group of processes, and idle core seconds, summed over windows.

    `str()` gives each group's share of one core, then the idle share, e.g. "engine 133%,
    browser 20%, idle 41% (2 cores, 200% in all)".
    """

    def __init__(self) -> None:
        self.used: Counter[str] = Counter()
        self.idle = 0.0
        self.seconds = 0.0

    @contextlib.contextmanager
    def window(self, groups: dict[str, set[int]]) -> Iterator[None]:
        """Adds what `groups` (name → pids) used, and the idle core time, while the block
        runs."""
        before, idle, began = cpu_seconds(groups), idle_seconds(), time.monotonic()
        yield
        self.used.update(cpu_seconds(groups) - before)
        self.idle += idle_seconds() - idle
        self.seconds += time.monotonic() - began

    def __str__(self) -> str:
        if not self.seconds:
            return "not measured"
        shares = [f"{group} {used / self.seconds:.0%}" for group, used in self.used.most_common()]
        # /proc/stat counts every core of the machine, not only those this process may use.
        total = os.cpu_count() or 1
        return (
            ", ".join([*shares, f"idle {self.idle / self.seconds:.0%}"])
            + f" ({total} cores, {100 * total}% in all)"
        )


def cpu_seconds(groups: dict[str, set[int]]) -> Counter[str]:
    """CPU seconds used so far by each group of processes (Linux /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    used: Counter[str] = Counter()
    for group, members in groups.items():
        for pid in members:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            used[group] += (int(fields[11]) + int(fields[12])) / ticks
    return used


def idle_seconds() -> float:
    """Seconds of core time the whole machine has spent idle since boot (/proc/stat)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    # "cpu user nice system idle iowait ...": idle and iowait are cores nobody used.
    return (int(fields[4]) + int(fields[5])) / os.sysconf("SC_CLK_TCK")


def processes(*matches: tuple[str, bytes]) -> dict[str, set[int]]:
    """The pids of this machine's processes whose command line contains a pattern, by the
    name paired with the first pattern that matches; this process is left out."""
    found: dict[str, set[int]] = {name: set() for name, _ in matches}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        for name, pattern in matches:
            if pattern in command:
                found[name].add(int(entry.name))
                break
    return found
