"""What a fresh Python process imports: to check that light modules stay light."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("tensorflow", "keras")


def heavy_modules_after(code: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """The modules of `heavy` that a new interpreter has imported after running `code`
    in the project root."""
    probe = (
        f"{code}\nimport json, sys\nprint(json.dumps(sorted(set({heavy!r}) & set(sys.modules))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])
