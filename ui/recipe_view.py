"""The Recipes page's parts: a card per recipe with **Run it**, and the live view of the
recipe a session started (its key charts, and the verdict as its runs end)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from core.charts import heatmap_figure, instrument_figures, live_figures
from core.engine.api import Runs
from core.escaping import escape_markdown
from core.knobs import InvalidInput
from core.recipes import RECIPES, Launch, Recipe, Verdict, results, start
from core.recipes.probe import PUBLISHED, Probe, assignment
from core.recipes.recipe import format_number
from core.store import UnknownRunError
from ui import nav, roles, state, views

LAUNCH = "recipe:launch"  # the recipe this session started last: its `Launch`, as a dict
# The chart that draws a metric key a recipe names, where the key is not a chart's own.
CHART_OF = {"val_loss": "loss", "val_accuracy": "accuracy", "clip_active": "grad_norm"}


def launched() -> tuple[Recipe, Launch] | None:
    """The recipe this session started last, and its runs."""
    saved: dict[str, Any] | None = st.session_state.get(LAUNCH)
    if saved is None or saved["recipe"] not in RECIPES:
        return None
    return RECIPES[saved["recipe"]], Launch.from_dict(saved)


def gallery(engine: Runs) -> None:
    """A card per recipe, two a row."""
    columns = st.columns(2)
    for i, recipe in enumerate(RECIPES.values()):
        with columns[i % 2]:
            card(engine, recipe)


def card(engine: Runs, recipe: Recipe) -> None:
    """A recipe's paper, claim, measure and runtime, and **Run it**."""
    with st.container(border=True):
        st.markdown(
            f"**{escape_markdown(recipe.title)}** · {escape_markdown(recipe.paper.citation)}"
        )
        st.markdown(escape_markdown(recipe.claim))
        st.caption(
            f"Measure: {escape_markdown(recipe.measure)} About {recipe.runtime_s:.0f} s on "
            "2 CPU cores."
        )
        if not roles.presents():
            return
        run_col, break_col = st.columns([1, 2])
        if run_col.button("Run it", key=f"recipe:run:{recipe.name}", icon=":material/play_arrow:"):
            launch_probed(engine, recipe, PUBLISHED)
        with break_col.popover("Try to break it", icon=":material/science:"):
            probe = probe_form(recipe)
            if (
                st.button(
                    "Run it so",
                    key=f"recipe:probe:{recipe.name}",
                    type="primary",
                    disabled=probe is None,
                )
                and probe is not None
            ):
                launch_probed(engine, recipe, probe)


def probe_form(recipe: Recipe) -> Probe | None:
    """A seed, the recipe's negative control or not, and knobs set on every arm: the
    probe they make (its values checked when it starts); None, said, for a line that is
    not KNOB=VALUE."""
    st.caption(
        "The same measure, with the recipe's stated numbers, on runs you change: a seed "
        "moves every run's initial weights and batch order; a knob or run field is set "
        "on every arm that has it."
    )
    seed = st.number_input("seed", min_value=0, value=0, step=1, key=f"recipe:seed:{recipe.name}")
    control = st.checkbox(
        "its negative control",
        key=f"recipe:control:{recipe.name}",
        help=f"{recipe.control.why} The verdict must say no.",
    )
    typed = st.text_area(
        "set on every arm, KNOB=VALUE a line",
        key=f"recipe:set:{recipe.name}",
        placeholder="radius=1000\nbatch_size=128",
    )
    overrides: dict[str, Any] = {**recipe.control.overrides} if control else {}
    try:
        overrides |= dict(assignment(line) for line in typed.splitlines() if line.strip())
    except ValueError as exc:
        st.error(f"set: {escape_markdown(str(exc))}", icon=":material/warning:")
        return None
    return Probe(int(seed), overrides)


def launch_probed(engine: Runs, recipe: Recipe, probe: Probe) -> None:
    """Starts `recipe` as `probe` makes it and shows it; or says, naming the field, why
    nothing started."""
    try:
        launch = start(recipe, engine, probe=probe)
    except InvalidInput as exc:  # a value refused, or the engine's: a model that cannot fit
        st.error(f"Not started: {escape_markdown(str(exc))}", icon=":material/warning:")
    else:
        st.session_state[LAUNCH] = launch.to_dict()
        st.rerun()


def live(engine: Runs, recipe: Recipe, launch: Launch) -> None:
    """The started recipe: its verdict box and key charts, ticking while its runs train;
    nothing once one of its runs has been deleted (the session forgets it)."""
    try:
        active = any(engine.status(run_id).active for run_id in launch.all_ids)
    except UnknownRunError:
        del st.session_state[LAUNCH]
        return

    @st.fragment(run_every=state.refresh_interval(active, state.CHART_REFRESH_SECONDS))
    def ticking() -> None:
        ended = results(launch, engine)
        so_far = recipe.verdict(ended)
        st.subheader(escape_markdown(recipe.title))
        if launch.probe.overrides == recipe.control.overrides:
            st.caption(
                f"Its negative control: {escape_markdown(recipe.control.why)} The verdict "
                f"must say no. ({escape_markdown(launch.probe.text())})"
            )
        elif not launch.probe.published:
            st.caption(f"Probed: {escape_markdown(launch.probe.text())}")
        verdict_box(recipe, so_far)
        tables = {
            f"recipe/{i}": heatmap_figure(
                f"recipe/{i}",
                title,
                table.values,
                table.rows,
                table.columns,
                axes=(table.row_name, table.column_name, table.value_name),
            )
            for i, (title, table) in enumerate(recipe.tables(ended).items())
        }
        if tables:
            views.show_in_columns(tables, live=True)
        shown = [views.run_view(engine, engine.status(run_id)) for run_id in launch.all_ids]
        figures = live_figures(shown) | instrument_figures(shown)
        keys = dict.fromkeys(CHART_OF.get(key, key) for key in recipe.charts)
        views.show_in_columns({key: figures[key] for key in keys if key in figures}, live=True)
        watch, compare = st.columns(2)
        if watch.button("Watch its runs on Live", icon=":material/monitoring:"):
            state.open_page(nav.LIVE.file, **{state.WATCH: launch.all_ids})
        if compare.button("Compare its runs", icon=":material/compare:"):
            state.open_page(nav.COMPARE.file, **{state.COMPARE: launch.all_ids})
        if active and so_far.final:
            st.rerun()  # every run has ended: a full rerun stops the timer

    ticking()


def verdict_box(recipe: Recipe, so_far: Verdict) -> None:
    """The verdict as it stands: reproduced or not, with its numbers; or how many runs
    have ended."""
    numbers = " · ".join(f"{name} = {format_number(v)}" for name, v in so_far.numbers.items())
    body = f"{escape_markdown(so_far.sentence)}\n\n{escape_markdown(numbers)}"
    if so_far.ended == 0:
        st.info(
            f"**Training: none of its {so_far.total} runs has ended yet.** "
            f"Measure: {escape_markdown(recipe.measure)}",
            icon=":material/hourglass_top:",
        )
    elif so_far.reproduced is None:
        st.info(
            f"**So far: {so_far.ended} of {so_far.total} runs ended.** {body}",
            icon=":material/hourglass_top:",
        )
    elif so_far.reproduced == "yes":
        st.success(f"**Reproduced.** {body}", icon=":material/check_circle:")
    elif so_far.reproduced == "inconclusive":
        st.warning(f"**Inconclusive here.** {body}", icon=":material/help:")
    else:
        st.error(f"**Not reproduced here.** {body}", icon=":material/cancel:")
