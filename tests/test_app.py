"""Every page renders without an exception (streamlit.testing.v1.AppTest)."""

from __future__ import annotations

import subprocess
import sys

from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]


def test_home_page_renders_catalogs() -> None:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception
    assert at.title[0].value.endswith("Optimizer Lab")
    names = [frame.value["name"].tolist() for frame in at.dataframe]
    assert "mnist-5k" in names[0] and "lenet" in names[1]


def test_home_page_does_not_import_tensorflow() -> None:
    code = "import sys, runpy; runpy.run_path('app.py'); print('tensorflow' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_optimizers_page_lists_every_optimizer() -> None:
    at = AppTest.from_file(str(ROOT / "pages" / "1_Optimizers.py"), default_timeout=60).run()
    assert not at.exception
    labels = " ".join(e.label for e in at.expander)
    for name in ("sgd", "momentum", "adam", "adamw", "clipped_adam", "projected_gd",
                 "scaled_sign_gd"):
        assert f"**{name}**" in labels
    assert "θ ← θ − η·g;  θ ← θ·min(1, r/‖θ‖)" in [c.value for c in at.code]
