"""The Sweep page's Population mode: a population-based training read from the store
(`core.population.lineage`), live: its lineage, each member's knob schedule, the ranking
and the best objective over time; a presenter replays the best member's schedule."""

from __future__ import annotations

import streamlit as st

from core.engine.api import Runs
from core.escaping import escape_markdown
from core.knobs import InvalidInput
from core.population.figures import best_figure, lineage_figure, schedule_figure
from core.population.lineage import PopulationView, population_names, read_population, replay_config
from core.readable import number
from ui import nav, roles, state, texts
from ui.live_chart import live_chart

PICKED = "population:picked"
KNOB = "population:knob"
RANKING_COLUMNS = {
    "member": st.column_config.TextColumn("member", pinned=True),
    "step": st.column_config.NumberColumn("step", format="%d"),
}


def populations_view(engine: Runs) -> None:
    """The populations of the store, the one picked drawn (a fragment that ticks while
    any of its runs trains)."""
    runs = engine.list()
    names = population_names(runs)
    if not names:
        st.info(
            "No population yet: `optlab pbt` trains one (docs/population.md).",
            icon=":material/info:",
        )
        return
    name = st.selectbox("Population", names, key=PICKED)
    view = read_population(engine, name, runs)
    if view is None:
        st.info("Its members are starting.", icon=":material/hourglass_top:")
        return
    st.fragment(_drawn, run_every=state.refresh_interval(_training(view)))(engine, name, view)


def _training(view: PopulationView) -> bool:
    return any(stretch.run.active for stretch in view.current.values())


def _drawn(engine: Runs, name: str, first: PopulationView) -> None:
    """The population, read again at each tick after the page's first (`first`)."""
    view = first if first.name == name and not _training(first) else read_population(engine, name)
    if view is None:
        return
    if _training(view) != _training(first):
        st.rerun()  # it ended, or was resumed: a full rerun sets the timer
    st.caption(escape_markdown(_plan_text(view)))
    knob = st.selectbox("Colour by", view.knobs, key=KNOB) if len(view.knobs) > 1 else view.knobs[0]
    live_chart(lineage_figure(view, knob), key=f"chart:population:lineage:{name}")
    schedules, best = st.columns(2)
    with schedules:
        live_chart(schedule_figure(view, knob), key=f"chart:population:schedule:{name}")
    with best:
        live_chart(best_figure(view), key=f"chart:population:best:{name}")
    _ranking(view)
    if roles.presents():
        _replay(engine, view)


def _plan_text(view: PopulationView) -> str:
    plan = view.plan
    searched = ", ".join(
        f"{d['name']} in [{number(d['low'])}, {number(d['high'])}]" + (" (log)" if d["log"] else "")
        for d in plan["space"]
    )
    exploits = len(view.exploits)
    return (
        f"{plan['population']} members × {plan['generations']} intervals of "
        f"{plan['interval']:,} steps · ranked by {view.metric} "
        f"({plan['objective']['direction']}d) · bottom {plan['quantile']:.0%} copy the top · "
        f"searching {searched} · {exploits} exploit{'s' if exploits != 1 else ''} so far"
    )


def _ranking(view: PopulationView) -> None:
    """The members now, best first."""
    rows = [
        {
            "member": f"m{stretch.member}",
            view.metric: stretch.last_value,
            **{knob: stretch.run.knobs.get(knob) for knob in view.knobs},
            "step": stretch.end,
            "status": stretch.run.status,
            "run": stretch.run.name,
        }
        for stretch in view.ranking()
    ]
    st.dataframe(
        rows,
        hide_index=True,
        placeholder=texts.NONE,
        column_config=RANKING_COLUMNS
        | {view.metric: st.column_config.NumberColumn(format="%.4f")}
        | {knob: st.column_config.NumberColumn(format="%.4g") for knob in view.knobs},
    )


def _replay(engine: Runs, view: PopulationView) -> None:
    best = view.best()
    if st.button(
        "Replay the best schedule",
        icon=":material/replay:",
        key=f"population:replay:{view.name}",
        disabled=best is None,
        help="One plain run from scratch with the best member's knob schedule: the config "
        "of the first run of its lineage, each knob change at its step (optlab train "
        "--schedule-from RUN). If it matches the member, the schedule explains the result; "
        "if not, the copied weights did.",
    ):
        assert best is not None
        try:
            run_id = engine.start(replay_config(engine, best.run.id))
        except InvalidInput as exc:
            st.error(escape_markdown(str(exc)), icon=":material/error:")
            return
        state.open_page(nav.LIVE.file, **{state.WATCH: [run_id, best.run.id]})
