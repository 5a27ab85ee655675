"""The address's parameters, cleaned before any page reads them: `?runs=ID,ID` (Live,
Compare), `?groups=G,G` (Compare) and `?view=presentation` (Live).

An address is typed, pasted and shared: it may name a run twice (`/Live?runs=ID,ID` gave
a multiselect one option twice, and the page died with `StreamlitDuplicateElementKey`),
name runs deleted since or never made, or hold anything at all. The frame (`app.py`)
calls `clean` before the page runs, so every page reads a clean address: each list keeps
the runs (groups) the lab holds, once each, in the order named, at most `MAX_NAMED`; a
`view` other than the presentation view is dropped; and the address bar shows what is
kept. Other parameters are not the lab's to read (the presenter's `key` is `ui.roles`'s,
and Streamlit's own `embed` options are Streamlit's), and stay as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Final

import streamlit as st

from core.engine import RunStatus
from core.engine.api import Runs
from core.engine.repeats import groups

RUNS: Final = "runs"  # the run ids a page shows
GROUPS: Final = "groups"  # the groups of repeats Compare shows
VIEW: Final = "view"  # Live's view (`ui.presentation`)
PRESENTATION: Final = "presentation"  # the one view the address may name
#: Runs (groups) an address may name: far more than a page draws legibly.
MAX_NAMED: Final = 100
#: Characters of a list read: what `MAX_NAMED` of the longest run ids take, and more.
MAX_TEXT: Final = 10_000

#: What each list may name: the lab's run ids, or its groups' names.
_KNOWN: Final[dict[str, Callable[[list[RunStatus]], Collection[str]]]] = {
    RUNS: lambda runs: {run.id for run in runs},
    GROUPS: lambda runs: groups(runs).keys(),
}


def items(text: str) -> list[str]:
    """The items of a comma-separated `text`, once each, in the order named, blanks
    left out; only its first `MAX_TEXT` characters are read."""
    return [item for item in dict.fromkeys(i.strip() for i in text[:MAX_TEXT].split(",")) if item]


def named(text: str, known: Collection[str]) -> list[str]:
    """The `items` of `text` that are in `known`, at most `MAX_NAMED`."""
    return [item for item in items(text) if item in known][:MAX_NAMED]


def clean(engine: Runs) -> None:
    """Cleans this session's address (see the module's docstring); a quiet note says
    how many runs or groups it named that the page cannot show."""
    params = st.query_params
    lists = [name for name in _KNOWN if name in params]
    dropped = 0
    if lists:
        runs = engine.list()
        for name in lists:
            # A parameter given twice (`?runs=A&runs=B`) is read as one list.
            given = params.get_all(name)
            kept = named(",".join(given), _KNOWN[name](runs))
            dropped += len(items(",".join(given))) - len(kept)
            _rewrite(name, given, ",".join(kept))
    if VIEW in params:
        given = params.get_all(VIEW)
        _rewrite(VIEW, given, PRESENTATION if PRESENTATION in given else "")
    if dropped:
        st.toast(
            f"The address named {dropped} run(s) or group(s) that the page cannot show "
            f"(not in this lab, or past the first {MAX_NAMED}): left out.",
            icon=":material/link_off:",
        )


def _rewrite(name: str, given: list[str], kept: str) -> None:
    """Sets parameter `name` to `kept` unless it holds that; drops it when empty."""
    if kept and given == [kept]:
        return
    if kept:
        st.query_params[name] = kept
    else:
        del st.query_params[name]
