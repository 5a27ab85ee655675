"""Compare's pick and its verdict: the groups of repeats and the single runs to compare
(in the URL as `?groups=…&runs=…`), and "Is A better than B?" for two of the groups."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import streamlit as st

from core.charts import group_figure
from core.engine import RunStatus
from core.engine.api import Runs
from core.engine.repeats import group_label, groups, whole_groups
from core.escaping import escape_markdown
from core.group_comparison import (
    compare,
    describe,
    higher_is_better,
    p_values_note,
    time_to_target,
    value_at,
)
from ui import address, texts

GROUPS, RUNS = "compare_groups", "compare_runs"  # the two multiselects' keys
NEWEST_GROUPS, NEWEST_RUNS = 2, 4  # what a first visit picks: groups if any, else runs
GROUP_METRICS = ("val_accuracy", "val_loss", "accuracy", "loss", "val_mae")
AT = ("the end", "a step", "time to reach")


@dataclass(frozen=True)
class Picked:
    """What Compare shows: every run and group of the lab, the groups picked (by group,
    in the order picked) and the runs to draw (the groups' runs, then the single runs)."""

    runs: dict[str, RunStatus]
    found: dict[str, list[RunStatus]]
    groups: dict[str, list[RunStatus]]
    chosen: list[RunStatus]


def pick(engine: Runs, handed_over: str) -> Picked:
    """The groups and single runs picked in two multiselects. Runs handed over by another
    page (session state `handed_over`) replace the pick, a group's runs as that group;
    else the URL's; the first time, the newest two groups whose runs have all ended (none:
    the newest four ended runs). Runs and groups that no longer exist drop out."""
    runs = {run.id: run for run in engine.list()}
    found = groups(runs.values())
    picks = st.session_state
    if handed_over in picks:
        picks[GROUPS], picks[RUNS] = whole_groups(picks.pop(handed_over), found)
    elif GROUPS not in picks and RUNS not in picks:
        picks[GROUPS], picks[RUNS] = from_url() or newest(list(runs.values()), found)
    picks[GROUPS] = [group for group in picks.get(GROUPS, []) if group in found]
    picks[RUNS] = [run_id for run_id in picks.get(RUNS, []) if run_id in runs]
    labels = {group: f"{group_label(members)} ×{len(members)}" for group, members in found.items()}
    left, right = st.columns(2)
    picked = left.multiselect(
        "Groups of repeats",
        list(found),
        key=GROUPS,
        format_func=labels.__getitem__,
        placeholder="Choose groups" if found else "No groups yet: train with repeats above 1",
        help="A config trained over several seeds (repeats on Train): pick two to ask "
        "whether one is better than the other.",
    )
    singles = right.multiselect(
        "Runs", list(runs), key=RUNS, format_func=lambda run_id: texts.label(runs[run_id])
    )
    for param, values in ((address.GROUPS, picked), (address.RUNS, singles)):
        if values:
            st.query_params[param] = ",".join(values)
        else:
            st.query_params.pop(param, None)
    members = [run.id for group in picked for run in found[group]]
    chosen = [runs[run_id] for run_id in dict.fromkeys([*members, *singles])]
    return Picked(runs, found, {group: found[group] for group in picked}, chosen)


def from_url() -> tuple[list[str], list[str]] | None:
    """The groups and runs a shared URL names (cleaned by `ui.address`); None when it
    names neither."""
    given = [st.query_params.get(param, "") for param in (address.GROUPS, address.RUNS)]
    if not any(given):
        return None
    picked, singles = (text.split(",") if text else [] for text in given)
    return picked, singles


def newest(
    runs: list[RunStatus], found: Mapping[str, list[RunStatus]]
) -> tuple[list[str], list[str]]:
    """A first visit's pick: the newest groups whose runs have all ended, or, without
    one, the newest ended runs (`runs` and `found` are newest first)."""
    ended = [group for group, members in found.items() if not any(r.active for r in members)]
    if ended:
        return ended[:NEWEST_GROUPS], []
    return [], [run.id for run in runs if not run.active][:NEWEST_RUNS]


def verdict(engine: Runs, picked: Mapping[str, Sequence[RunStatus]]) -> None:
    """Is A better than B? Two of the groups picked (their completed runs), one metric at
    one point (or the steps to reach a value), compared in words, with what the p-values
    can say and both groups drawn as mean and band."""
    st.subheader("Is A better than B?")
    completed = {
        g: [run for run in runs if run.status == "completed"] for g, runs in picked.items()
    }
    found = {group: runs for group, runs in completed.items() if runs}
    if len(found) < 2:
        st.caption("Two of the groups picked need completed runs to be compared.")
        return
    labels = {group: f"{group_label(members)} ×{len(members)}" for group, members in found.items()}
    a_col, b_col, metric_col = st.columns(3)
    a = a_col.selectbox("A", list(found), format_func=labels.get, key="compare:a")
    b = b_col.selectbox("B", [g for g in found if g != a], format_func=labels.get, key="compare:b")
    metric = metric_col.selectbox("metric", GROUP_METRICS, key="compare:metric")
    at_col, where_col = st.columns(2)
    at = at_col.radio("at", AT, horizontal=True, key="compare:at")
    metrics = {g: [engine.metrics(run.id) for run in found[g]] for g in (a, b)}
    if at == "a step":
        step = int(where_col.number_input("step", min_value=1, value=100, key="compare:step"))
        values = {g: [value_at(m, metric, step) for m in metrics[g]] for g in (a, b)}
        what = f"{metric} at step {step:,}"
    elif at == "time to reach":
        target = where_col.number_input("target", value=0.9, format="%g", key="compare:target")
        better = higher_is_better(metric)
        values = {
            g: [
                time_to_target(m.steps, m[metric], target, higher_is_better=better)
                if metric in m
                else float("inf")
                for m in metrics[g]
            ]
            for g in (a, b)
        }
        what = f"steps to {metric} {'≥' if better else '≤'} {target:g}"
    else:
        values = {g: [value_at(m, metric) for m in metrics[g]] for g in (a, b)}
        what = f"final {metric}"
    try:
        result = compare(values[a], values[b])
    except ValueError as exc:
        st.warning(f"Not compared: {exc}.", icon=":material/warning:")
    else:
        percent = "accuracy" in metric and at != "time to reach"
        text = describe(result, group_label(found[a]), group_label(found[b]), what, percent=percent)
        st.markdown(escape_markdown(text))
        st.caption(escape_markdown(p_values_note(result)))
    st.plotly_chart(
        group_figure({labels[a]: metrics[a], labels[b]: metrics[b]}, metric),
        key="chart:groups",
    )


def how_to_compare_groups(picks: Picked) -> None:
    """Where "Is A better than B?" would be, when fewer than two groups are picked: how
    to get it."""
    st.subheader("Is A better than B?")
    if len(picks.found) >= 2:
        st.caption("Pick two groups of repeats above to ask whether one is better.")
        return
    st.caption(
        "Train a config with **repeats** above 1 (on Train, or `train --repeats N`) for each "
        "of two configs: each is a group of runs over seeds, and here one group is compared "
        "with the other, with a 95% interval and p-values."
    )
