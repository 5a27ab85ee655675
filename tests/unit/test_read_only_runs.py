"""`ReadOnlyRuns`, a viewer's `Runs`: every verb of the protocol is a read it forwards or an
action it refuses before touching the runs it wraps; none slips through unnamed."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from core.engine.api import Runs
from core.engine.read_only import ACTIONS, READS, NotAllowed, ReadOnlyRuns


def protocol_verbs() -> set[str]:
    """Every public verb (method or property) `Runs` declares."""
    return {name for name in vars(Runs) if not name.startswith("_")}


class Recording:
    """Stands for the runs a viewer's wrapper holds: records every verb asked of it."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.asked.append(name)
        return lambda *args, **kwargs: ("answer", name)


def call(runs: Any, verb: str) -> Any:
    """`verb` of `runs`, with a stand-in for each argument it requires."""
    declared = inspect.getattr_static(Runs, verb)
    if isinstance(declared, property):
        return getattr(runs, verb)
    needed = [
        p
        for p in inspect.signature(declared).parameters.values()
        if p.name != "self" and p.default is p.empty and p.kind is not p.VAR_KEYWORD
    ]
    return getattr(runs, verb)(*(f"<{p.name}>" for p in needed))


def test_every_verb_of_runs_is_a_read_or_a_refused_action() -> None:
    assert not READS & set(ACTIONS)
    assert READS | set(ACTIONS) == protocol_verbs()


@pytest.mark.parametrize("verb", sorted(ACTIONS))
def test_a_viewer_is_refused_every_action_before_it_reaches_the_runs(verb: str) -> None:
    wrapped = Recording()
    with pytest.raises(NotAllowed, match="Only the presenter can"):
        call(ReadOnlyRuns(wrapped), verb)
    assert wrapped.asked == []
    assert isinstance(NotAllowed(verb), PermissionError)


@pytest.mark.parametrize("verb", sorted(READS))
def test_a_viewer_reads_through_the_wrapper(verb: str) -> None:
    wrapped = Recording()
    answer = call(ReadOnlyRuns(wrapped), verb)
    assert wrapped.asked == [verb]
    if verb != "location":  # a property: the wrapped one's value
        assert answer == ("answer", verb)
