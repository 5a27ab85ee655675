"""The Recipes page's parts: a card per recipe, with its latest launch's verdict and, for
the presenter, **Run it**; and the key charts of one launch, ticking as its runs train.

What a card shows is read from the store (`core.recipes.launches`): every recipe's
latest launch and the status of its runs, the same for every session, after a reload, in
another browser and on a room's viewers, and for every recipe at once. A session keeps
only which recipe's charts it looks at; a viewer that follows looks at the presenter's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import streamlit as st

from core.charts import heatmap_figure, instrument_figures, live_figures
from core.engine.api import Runs
from core.escaping import escape_markdown
from core.knobs import InvalidInput
from core.readable import number
from core.recipes import RECIPES, Launch, Recipe, Verdict, results, start
from core.recipes.launches import latest, recorded
from core.recipes.probe import PUBLISHED, Probe, assignment
from core.store import ACTIVE_STATUSES, UnknownRunError
from ui import follow_presenter, nav, roles, state, views

SHOWN = "recipe:shown"  # the recipe whose charts this session picked (Run it, Show its charts)
CARD = "recipe-card-"  # before a recipe's name: its card's key (the page's class `st-key-…`)
# The chart that draws a metric key a recipe names, where the key is not a chart's own.
CHART_OF = {"val_loss": "loss", "val_accuracy": "accuracy", "clip_active": "grad_norm"}


@dataclass(frozen=True)
class Launched:
    """Each recipe's latest launch in the store, by name, newest first, and the status of
    each of their runs: read at once, and compared whole to tell that the page is stale."""

    launches: dict[str, Launch]
    statuses: dict[str, str]  # by run id

    @classmethod
    def read(cls, engine: Runs) -> Launched:
        runs = engine.list()
        found = {name: launch for name, launch in latest(engine, runs).items() if name in RECIPES}
        ids = {run_id for launch in found.values() for run_id in launch.all_ids}
        return cls(found, {run.id: run.status for run in runs if run.id in ids})

    def active(self, launch: Launch) -> bool:
        """Whether a run of `launch` has not ended."""
        return any(self.statuses.get(run_id) in ACTIVE_STATUSES for run_id in launch.all_ids)


def intro() -> None:
    """What the page does, in the words of what this session can do."""
    if roles.presents():
        how = "**Run it** starts a finding's runs, its key chart fills in as they train"
    else:
        how = "the presenter runs a finding, its key chart fills in here as its runs train"
    st.markdown(
        f"Published optimizer findings, reproduced live: {how}, and the verdict says "
        "whether the claim held here, with the numbers it rests on. A finding that does "
        "not reproduce says so."
    )


def shown(engine: Runs, launched: Launched) -> Launch | None:
    """The launch whose charts the page shows: the presenter's, for a viewer that follows
    it; else that of the recipe this session picked; else the newest. Published for the
    room, on the presenter's page."""
    choice = _led(engine, launched) or launched.launches.get(st.session_state.get(SHOWN, ""))
    choice = choice or next(iter(launched.launches.values()), None)
    follow_presenter.publish(engine, choice.all_ids if choice else [], page=nav.RECIPES)
    return choice


def _led(engine: Runs, launched: Launched) -> Launch | None:
    """The launch whose charts the presenter shows, while this viewer follows it."""
    runs = follow_presenter.led_runs(engine, nav.RECIPES)
    if runs is None:
        return None
    same = (launch for launch in launched.launches.values() if tuple(launch.all_ids) == runs)
    led = next(same, None) or recorded(engine, runs[0])  # one a moment newer than our read
    return led if led is not None and led.recipe in RECIPES else None


def keep_current(engine: Runs, launched: Launched) -> None:
    """Runs the page again when what it shows changed in the store: a recipe launched
    (here, in another session, from the command line), a run of a launch ended or was
    deleted, or the presenter looks at another recipe's charts. Looked at every few
    seconds, on every session's page."""
    drawn = (launched, follow_presenter.led_runs(engine, nav.RECIPES))

    @st.fragment(run_every=state.SIDEBAR_REFRESH_SECONDS)
    def watch() -> None:
        if (Launched.read(engine), follow_presenter.led_runs(engine, nav.RECIPES)) != drawn:
            st.rerun()

    watch()


def gallery(engine: Runs, launched: Launched, showing: Launch | None) -> None:
    """A card per recipe, two a row."""
    columns = st.columns(2)
    for i, recipe in enumerate(RECIPES.values()):
        with columns[i % 2]:
            card(engine, recipe, launched, showing)


def card(engine: Runs, recipe: Recipe, launched: Launched, showing: Launch | None) -> None:
    """A recipe's paper, claim, measure and runtime; its latest launch's verdict, with a
    button to show its charts; and, for the presenter, **Run it** and its probes."""
    with st.container(border=True, key=f"{CARD}{recipe.name}"):
        st.markdown(
            f"**{escape_markdown(recipe.title)}** · {escape_markdown(recipe.paper.citation)}"
        )
        st.markdown(escape_markdown(recipe.claim))
        st.caption(
            f"Measure: {escape_markdown(recipe.measure)} About {recipe.runtime_s:.0f} s on "
            "2 CPU cores."
        )
        if (launch := launched.launches.get(recipe.name)) is not None:
            probe_caption(recipe, launch)
            verdict_box(recipe, verdict(engine, recipe, launch, launched))
            if launch != showing:
                st.button(
                    "Show its charts",
                    key=f"recipe:show:{recipe.name}",
                    icon=":material/bar_chart:",
                    on_click=_pick,
                    args=(recipe.name,),
                )
        if roles.presents():
            controls(engine, recipe)


def _pick(name: str) -> None:
    """This session looks at recipe `name`'s charts: its own pick, which ends following."""
    st.session_state[SHOWN] = name
    follow_presenter.unfollow()


def controls(engine: Runs, recipe: Recipe) -> None:
    """**Run it**, and **Try to break it** with its probe form: the presenter's."""
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
    overrides: dict[str, object] = {**recipe.control.overrides} if control else {}
    try:
        overrides |= dict(assignment(line) for line in typed.splitlines() if line.strip())
    except ValueError as exc:
        st.error(f"set: {escape_markdown(str(exc))}", icon=":material/warning:")
        return None
    return Probe(int(seed), overrides)


def launch_probed(engine: Runs, recipe: Recipe, probe: Probe) -> None:
    """Starts `recipe` as `probe` makes it and shows its charts; or says, naming the
    field, why nothing started."""
    try:
        start(recipe, engine, probe=probe)
    except InvalidInput as exc:  # a value refused, or the engine's: a model that cannot fit
        st.error(f"Not started: {escape_markdown(str(exc))}", icon=":material/warning:")
    else:
        st.session_state[SHOWN] = recipe.name
        st.rerun()


def verdict(engine: Runs, recipe: Recipe, launch: Launch, launched: Launched) -> Verdict:
    """`recipe`'s verdict on `launch`'s runs ended so far, read again only when one of
    them has ended since (the ended runs' metrics no longer change)."""
    statuses = tuple(launched.statuses.get(run_id, "") for run_id in launch.all_ids)
    return _verdict(
        str(engine.location), json.dumps(launch.to_dict(), sort_keys=True), statuses, engine
    )


@st.cache_data(max_entries=64, show_spinner=False)
def _verdict(location: str, launch: str, statuses: tuple[str, ...], _engine: Runs) -> Verdict:
    """The verdict, for every session, by store, launch and its runs' statuses."""
    parsed = Launch.from_dict(json.loads(launch))
    return RECIPES[parsed.recipe].verdict(results(parsed, _engine))


def probe_caption(recipe: Recipe, launch: Launch) -> None:
    """Says how `launch` differs from the recipe as published: its negative control, or
    a probe (a seed, knobs set); nothing for the published runs."""
    if launch.probe.published:
        return
    if dict(launch.probe.overrides) == dict(recipe.control.overrides):
        st.caption(
            f"Its negative control: {escape_markdown(recipe.control.why)} The verdict "
            f"must say no. ({escape_markdown(launch.probe.text())})"
        )
    else:
        st.caption(f"Probed: {escape_markdown(launch.probe.text())}")


def live(engine: Runs, launch: Launch, active: bool) -> None:
    """`launch`'s verdict box and key charts, ticking while its runs train (`active`)."""
    recipe = RECIPES[launch.recipe]

    @st.fragment(run_every=state.refresh_interval(active, state.CHART_REFRESH_SECONDS))
    def ticking() -> None:
        try:
            ended = results(launch, engine)
            watched = [engine.status(run_id) for run_id in launch.all_ids]
        except UnknownRunError:
            return  # a run deleted meanwhile: the page's next look passes the launch over
        st.subheader(escape_markdown(recipe.title))
        probe_caption(recipe, launch)
        verdict_box(recipe, recipe.verdict(ended))
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
        shown_runs = [views.run_view(engine, run) for run in watched]
        figures = live_figures(shown_runs) | instrument_figures(shown_runs)
        keys = dict.fromkeys(CHART_OF.get(key, key) for key in recipe.charts)
        views.show_in_columns({key: figures[key] for key in keys if key in figures}, live=True)
        watch, compare = st.columns(2)
        if watch.button("Watch its runs on Live", icon=":material/monitoring:"):
            state.open_page(nav.LIVE.file, **{state.WATCH: launch.all_ids})
        if compare.button("Compare its runs", icon=":material/compare:"):
            state.open_page(nav.COMPARE.file, **{state.COMPARE: launch.all_ids})

    ticking()


def verdict_box(recipe: Recipe, so_far: Verdict) -> None:
    """The verdict as it stands: reproduced or not, with its numbers; or how many runs
    have ended."""
    numbers = " · ".join(f"{name} = {number(v)}" for name, v in so_far.numbers.items())
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
