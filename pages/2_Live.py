"""Live: watch one or more runs train, steer them, and read their charts as they grow."""

from __future__ import annotations

import numpy as np
import streamlit as st

from core import optimizers
from core.charts import INSTRUMENT_HELP, RunView, instrument_figures, live_figures
from core.engine import RunStatus
from core.knobs import InvalidHyperparameters
from ui import format, nav, state, views

st.set_page_config(page_title="Live · Optimizer Lab", page_icon="📈", layout="wide")
nav.sidebar()
st.title("📈 Live")

SELECTION = "live_runs"
engine = state.engine()


def slider_values(low: float | None, value: float) -> list[float]:
    """1-2-5 steps over ten decades around `value`, within the knob's range, plus `value`."""
    values = {value}
    for exponent in range(-8, 7):
        for mantissa in (1, 2, 5):
            candidate = float(f"{mantissa}e{exponent}")
            if value / 1e4 <= candidate <= max(value, 1e-8) * 1e4:
                values.add(candidate)
    if low == 0.0:
        values.add(0.0)
    return sorted(values)


def change_knob(run_id: str, name: str, key: str) -> None:
    try:
        engine.update(run_id, **{name: st.session_state[key]})
        st.toast(f"{name} → {st.session_state[key]:g} from the next step")
    except (InvalidHyperparameters, LookupError) as exc:
        st.toast(f"Not changed: {exc}", icon="⚠️")


def knob_sliders(run: RunStatus, latest: dict[str, float]) -> None:
    """A slider per live knob that is on. Its options come from the value the run started
    with, so they stay put across refreshes; moving it is the only thing that changes it."""
    spec = optimizers.get_spec(run.config["optimizer"])
    hyperparameters = run.config["hyperparameters"]
    live = [k for k in spec.knobs if k.live and hyperparameters.get(k.name) is not None]
    columns = st.columns(len(live) or 1)
    for column, knob in zip(columns, live, strict=False):
        key = f"live:{run.id}:{knob.name}"
        current = float(f"{np.float32(latest.get(knob.name, hyperparameters[knob.name]))}")
        options = slider_values(knob.low, hyperparameters[knob.name])
        if current not in options:  # changed elsewhere (another tab, the CLI)
            options = sorted({*options, current})
        st.session_state.setdefault(key, current)
        with column:
            st.select_slider(
                knob.name,
                options,
                key=key,
                format_func=lambda v: f"{v:g}",
                help=knob.help,
                on_change=change_knob,
                args=(run.id, knob.name, key),
            )


def latest_values(view: RunView) -> dict[str, float]:
    """Each series' last logged value (series are NaN where a step did not log them)."""
    latest = {}
    for key in view.metrics.keys:
        logged = view.metrics[key][~np.isnan(view.metrics[key])]
        if len(logged):
            latest[key] = float(logged[-1])
    return latest


def run_panel(run: RunStatus, latest: dict[str, float]) -> None:
    with st.container(border=True):
        title, buttons = st.columns([3, 2])
        with title:
            st.markdown(
                f"**{run.name}** `{run.id}` · {format.badge(run.status)}  \n{format.knobs(run)}"
            )
        with buttons:
            pause, stop, clone = st.columns(3)
            controls = (
                (pause, "▶ Resume", "resume", engine.resume, run.status == "paused"),
                (pause, "⏸ Pause", "pause", engine.pause, run.status in ("queued", "running")),
                (stop, "⏹ Stop", "stop", engine.stop, run.active),
            )
            for column, label, action, handler, shown in controls:
                if shown:
                    column.button(
                        label,
                        key=f"{action}:{run.id}",
                        on_click=handler,
                        args=(run.id,),
                        width="stretch",
                    )
            if clone.button(
                "⧉ Clone",
                key=f"clone:{run.id}",
                width="stretch",
                help="Open this run's config in Train, to tweak and rerun.",
            ):
                state.open_page("pages/1_Train.py", **{state.PREFILL: run.config})
        speed = f"{run.steps_per_second:.1f} steps/s" if run.steps_per_second else ""
        eta = f"ETA {format.duration(run.eta_seconds)}" if run.eta_seconds else ""
        text = " · ".join(p for p in (f"step {run.step}/{run.total_steps or '?'}", speed, eta) if p)
        st.progress(min(run.progress, 1.0), text=text)
        if run.status == "diverged" and run.final_metrics:
            st.error(
                f"Diverged: the loss was not finite at step "
                f"{run.final_metrics.get('diverged_at')}. Metrics before it are kept."
            )
        if run.error:
            st.error(f"Run {run.status}:")
            st.code(run.error, language=None)
        if run.active:
            with st.expander("Change knobs while it trains"):
                knob_sliders(run, latest)


runs, selected = views.pick_runs(
    engine,
    SELECTION,
    state.WATCH,
    default=lambda runs: [r.id for r in runs if r.active][:4] or [r.id for r in runs[:1]],
)
if not selected:
    st.info("Nothing to watch yet: start a run on **Train**, or the demo race on **Home**.")
    st.stop()
any_active = any(runs[i].active for i in selected)


@st.fragment(run_every=state.refresh_interval(any_active))
def live_view(run_ids: list[str], was_active: bool) -> None:
    statuses = [engine.status(run_id) for run_id in run_ids]
    shown = [views.run_view(engine, s) for s in statuses]
    for status, view in zip(statuses, shown, strict=True):
        run_panel(status, latest_values(view))
    views.show_in_columns(live_figures(shown))
    st.subheader("Instruments")
    st.caption(
        "Measured each at its own interval (see the run's `*_every` fields), so that "
        "together they cost a bounded share of the step time. Heat strips show the "
        "first selected run."
    )
    views.show_in_columns(instrument_figures(shown), captions=INSTRUMENT_HELP)
    if was_active and not any(s.active for s in statuses):
        st.rerun()  # everything ended: a full rerun turns the refresh timer off


live_view(selected, any_active)
