"""The address's parameters (`ui.address`, issue 51 item 5): a shared link that names a run
twice (`/Live?runs=ID,ID`) opened Live on `StreamlitDuplicateElementKey`. Every page now
reads a cleaned address: duplicates, unknown runs and groups, and garbage dropped, and
the address bar rewritten to what is kept; every page opens on any address."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from core.store import Store
from tests import app_server
from tests.apptest import framed, page, written_group, written_run
from tests.browser import NEEDS_CHROMIUM, chromium, settle
from tests.waiting import scaled
from ui import address, nav

RUN, OTHER = "ended", "other"
GROUP = "g-pair"  # `written_group`'s group of the runs `pair-0` and `pair-1`


@pytest.fixture
def lab(app_store: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two single runs and a group of two, all ended; pages open in the frame."""
    framed(monkeypatch)
    store = Store(app_store)
    written_run(store, RUN, "an ended run")
    written_run(store, OTHER, "another")
    written_group(store, "pair", (0.4, 0.5))
    return app_store


def opened(shown: nav.Page, params: dict[str, str | list[str]]) -> AppTest:
    """Page `shown` of the app opened at an address with `params`."""
    at = page(shown)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def test_a_link_that_names_a_run_twice_opens_live_on_it_once(lab) -> None:
    at = opened(nav.LIVE, {"runs": f"{RUN},{RUN}"})
    assert not at.exception, at.exception
    assert at.multiselect(key="live_runs").value == [RUN]
    assert at.query_params["runs"] == RUN  # the address bar says what is shown


@pytest.mark.slow
@NEEDS_CHROMIUM
def test_the_shared_link_opens_live_in_a_browser(tmp_path) -> None:
    """The crash as reported: `/Live?runs=ID,ID` on Streamlit's real server."""
    store = tmp_path / "lab.sqlite"
    written_run(Store(store), RUN, "an ended run")
    process, port = app_server.start(store, tmp_path / "streamlit.log")
    try:
        with chromium() as browser:
            tab = browser.new_page(viewport={"width": 1400, "height": 1000})
            tab.goto(f"http://127.0.0.1:{port}{nav.LIVE.url}?runs={RUN},{RUN}")
            settle(tab)
            assert tab.locator("[data-testid=stException]").count() == 0
            tab.wait_for_url(f"**{nav.LIVE.url}?runs={RUN}", timeout=scaled(30_000))  # rewritten
            assert tab.get_by_text("an ended run").count() >= 1  # picked, once
    finally:
        app_server.stop(process, store)


def test_unknown_runs_and_garbage_drop_out_with_a_quiet_note(lab) -> None:
    named = f" {OTHER} ,no-such-run,,<script>,{RUN},{OTHER},{'x' * 5000}"
    at = opened(nav.LIVE, {"runs": [named, RUN], "view": "nonsense"})
    assert not at.exception, at.exception
    assert at.multiselect(key="live_runs").value == [OTHER, RUN]
    assert at.query_params == {"runs": f"{OTHER},{RUN}"}
    assert any("named 3 run(s) or group(s)" in toast.value for toast in at.toast)


def test_compare_keeps_the_groups_and_runs_it_holds(lab) -> None:
    at = opened(nav.COMPARE, {"groups": f"{GROUP},g-gone,{GROUP}", "runs": f"{RUN},{RUN}"})
    assert not at.exception, at.exception
    assert at.multiselect(key="compare_groups").value == [GROUP]
    assert at.multiselect(key="compare_runs").value == [RUN]
    assert at.query_params == {"groups": GROUP, "runs": RUN}


def test_the_presentation_view_is_kept(lab) -> None:
    at = opened(nav.LIVE, {"runs": RUN, "view": ["presentation", "other"]})
    assert not at.exception, at.exception
    assert at.query_params == {"runs": RUN, "view": "presentation"}


def test_a_list_names_at_most_max_named() -> None:
    known = [f"r{i}" for i in range(address.MAX_NAMED + 5)]
    assert address.named(",".join(known), set(known)) == known[: address.MAX_NAMED]


# Property: every page, any address -----------------------------------------------------

KNOWN = (RUN, OTHER, "pair-0", "pair-1", GROUP)
ITEMS = st.one_of(
    st.sampled_from(KNOWN),  # what a shared link names
    st.text(max_size=12),  # and anything else
    st.sampled_from(("", " ", ",", "%2C", "\x00", "é", "-", "=1+2", "x" * 300)),
)
LISTS = st.lists(ITEMS, max_size=8).map(",".join)
VALUES = st.one_of(LISTS, st.lists(LISTS, min_size=2, max_size=3))  # a name given twice
NAMES = st.sampled_from(("runs", "groups", "view", "key", "embed", "other"))
PARAMS = st.dictionaries(NAMES, st.one_of(VALUES, st.sampled_from(("presentation", ""))))


@pytest.mark.slow
@pytest.mark.parametrize("shown", nav.PAGES, ids=lambda shown: shown.title)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(params=PARAMS)
def test_every_page_opens_on_any_address(lab, shown, params) -> None:
    at = opened(shown, params)
    assert not at.exception, (shown.title, params, at.exception)
    for key in ("runs", "groups"):
        if key in at.query_params:  # rewritten: what the page shows, once each
            kept = at.query_params[key].split(",")
            assert len(kept) == len(set(kept)) and set(kept) <= set(KNOWN), (shown.title, params)
    assert at.query_params.get("view", "presentation") == "presentation"
