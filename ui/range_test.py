"""A learning-rate range test's panel: its progress, its curve, its suggestion, and
"Use this rate". Train draws it under the form the test was started from; Live draws it
for any run of kind lr_find."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from core.charts import range_test_figure
from core.engine.api import Runs
from core.engine.lr_find import RangeTest
from core.escaping import escape_markdown
from core.readable import number
from core.store import LR_FIND_ENDED_EVENT
from ui import roles, texts
from ui.live_chart import live_chart

USE = "Use this rate"


def panel(engine: Runs, run_id: str, was_active: bool, use: Callable[[float], None]) -> None:
    """Draws the range test of run `run_id`; "Use this rate" calls `use` with the
    suggested rate. Reruns the page once the test ends (in a fragment that ticks while
    it runs, that redraws everything with the final curve)."""
    run = engine.status(run_id)
    curve = RangeTest.of(engine.metrics(run_id))
    name, shown_id = escape_markdown(run.name), escape_markdown(run.id)  # as stored
    st.markdown(f"**{name}** :gray[{shown_id}] · {texts.badge(run.status)}")
    if run.active:
        st.progress(min(run.progress, 1.0), text=f"step {texts.steps(run)}")
    live_chart(range_test_figure(curve), key=f"lr_find:{run_id}")
    ended = [e for e in engine.events(run_id) if e.kind == LR_FIND_ENDED_EVENT]
    if ended:
        st.caption(
            f"Ended at step {ended[-1].step:,}: {escape_markdown(ended[-1].payload['reason'])}."
        )
    if was_active and not run.active:
        st.rerun()
    if run.error:
        st.error(escape_markdown(run.error.partition("\n")[0]), icon=":material/error:")
    if curve.suggestion is None:
        if not run.active:
            st.warning(
                "No suggestion: the loss never fell over the range. Try a wider range "
                "(a smaller first rate) or another optimizer.",
                icon=":material/warning:",
            )
        return
    st.markdown(
        f"Suggested learning rate: **{number(curve.suggestion, 3)}**, where the smoothed loss "
        "falls fastest (by the largest fraction per step)."
        + (" So far: the test still runs." if run.active else "")
    )
    if roles.presents() and st.button(
        USE,
        icon=":material/check:",
        key=f"lr_find:use:{run_id}",
        disabled=run.active,
        help="Set the Train form's learning_rate to the suggested rate.",
    ):
        use(curve.suggestion)
