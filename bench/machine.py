"""What the bench ran on, for the results file: hardware, software, date, and load.

Everything is read from the running system; what cannot be read says "unknown". The
load average matters on a shared machine: the ratios are robust to it, the absolute
numbers are not.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

from core.training.threads import available_cores

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def describe() -> dict[str, str]:
    """Label → value, in the order the results file lists them."""
    return {
        "CPU": _cpu_model(),
        "Cores": f"{available_cores()} available ({os.cpu_count()} logical in the machine)",
        "Memory": _memory(),
        "OS": platform.platform(),
        "Python": platform.python_version(),
        "TensorFlow": _version("tensorflow"),
        "Keras": _version("keras"),
        "NumPy": _version("numpy"),
        "Plotly": _version("plotly"),
        "Commit": _commit(),
        "Date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "Load average": load_average(),
    }


def load_average() -> str:
    """The 1, 5 and 15-minute load averages, or "unknown"."""
    try:
        return ", ".join(f"{load:.2f}" for load in os.getloadavg())
    except (AttributeError, OSError):
        return "unknown"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                kib = int(line.split()[1])
                return f"{kib / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return "unknown"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _commit() -> str:
    """The checked-out commit, marked `+ changes` when the tree differs from it."""
    try:
        commit = _git("rev-parse", "--short", "HEAD")
        return f"{commit} + changes" if _git("status", "--porcelain") else commit
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _git(*args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True, timeout=10
    )
    return done.stdout.strip()
