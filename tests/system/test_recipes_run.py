"""A recipe end to end, shortened: its runs started on an engine, tagged, waited for,
and judged from what they stored."""

from __future__ import annotations

import math

import pytest

from core.engine import Engine
from core.engine.client import EngineClient
from core.recipes import RECIPES, Launch, run, start, verdict
from core.recipes.launches import latest
from core.recipes.probe import Probe
from core.recipes.runner import TAG_PREFIX
from core.store import LAUNCH_EVENT, Store
from tests.cli import run_main
from tests.waiting import scaled


def test_edge_of_stability_runs_and_is_judged_in_a_shortened_form(tmp_path) -> None:
    recipe = RECIPES["edge_of_stability"]
    seen = []
    with Store(tmp_path / "lab.sqlite") as store:
        engine = Engine(store)
        try:
            final = run(recipe, engine, max_steps=30, progress=lambda s, v: seen.append(v))
            runs = engine.list()
        finally:
            engine.close()
    assert final.reproduced is not None and (final.ended, final.total) == (2, 2)
    # Called as each run ends (both may have ended by the first call: they train at once).
    assert len(seen) == 2 and seen[0].ended in (1, 2) and seen[1].text() == final.text()
    assert math.isfinite(final.numbers["first sharpness at η=0.5"])  # measured by step 5
    assert math.isfinite(final.numbers["plateau ratio"])  # over steps 16-30
    assert {run.status for run in runs} == {"completed"}
    assert all(run.tags == (f"{TAG_PREFIX}{recipe.name}",) for run in runs)
    assert {run.step for run in runs} == {30}


def test_a_launch_starts_each_arm_as_a_group_and_is_kept_as_plain_data(tmp_path) -> None:
    recipe = RECIPES["clipping"]
    with Store(tmp_path / "lab.sqlite") as store:
        engine = Engine(store, max_concurrent=1)
        try:
            launch = start(recipe, engine, max_steps=2)
            so_far = verdict(recipe, launch, engine)  # before any run has ended
            groups = {
                key: {engine.status(i).config["group"] for i in ids}
                for key, ids in launch.run_ids.items()
            }
        finally:
            engine.close()  # the runs not ended end interrupted
    assert Launch.from_dict(launch.to_dict()) == launch
    assert [len(ids) for ids in launch.run_ids.values()] == [3, 3]
    assert all(len(g) == 1 and None not in g for g in groups.values())  # one group each
    assert len(set().union(*groups.values())) == 2
    assert so_far.reproduced is None and so_far.total == 6


def test_each_recipes_latest_launch_is_found_again_from_its_stored_runs(tmp_path) -> None:
    """A launch is recorded on each of its runs: a reader of the store in another process
    finds each recipe's latest, a probe told apart from the published runs; a launch one
    of whose runs was deleted gives way to the one before; a run tagged by hand, or whose
    record is not a launch's, is none."""
    edge, projection = RECIPES["edge_of_stability"], RECIPES["projection"]
    path = tmp_path / "lab.sqlite"
    with Store(path) as store:
        engine = Engine(store)
        try:
            published = start(edge, engine, max_steps=1)
            probed = start(edge, engine, max_steps=1, probe=Probe(1, {"epochs": 2}))
            other = start(projection, engine, max_steps=1)
            by_hand = engine.start({**SHORT_RUN, "name": "tagged by hand"})
            for run_id in [*published.all_ids, *probed.all_ids, *other.all_ids, by_hand]:
                engine.wait(run_id, scaled(120))
            engine.set_tags(by_hand, [f"{TAG_PREFIX}{edge.name}"])
        finally:
            engine.close()
    with Store(path) as store:  # as another process reads the store
        reader = EngineClient(store)
        found = latest(reader, reader.list())
        assert found == {edge.name: probed, projection.name: other}
        assert not found[edge.name].probe.published and found[projection.name].probe.published
        store.add_event(by_hand, 0, LAUNCH_EVENT, {"recipe": edge.name})  # not a launch's
        reader.delete(probed.all_ids[-1])
        assert latest(reader, reader.list()) == {edge.name: published, projection.name: other}


#: A run of a second or so, started by hand.
SHORT_RUN = {"dataset": "digits", "model": "mlp", "optimizer": "sgd", "max_steps": 2}


def test_a_launch_read_from_the_store_names_what_is_wrong_with_it() -> None:
    good = Launch("clipping", {"clipped": ["a", "b"]}, Probe(2, {"clip_norm": 1.0}))
    assert Launch.from_dict(good.to_dict()) == good
    for field, value in (("recipe", 3), ("run_ids", {"clipped": "ab"}), ("probe", {"seed": "2"})):
        with pytest.raises(ValueError, match=f"^{field}: not as a launch writes it"):
            Launch.from_dict({**good.to_dict(), field: value})


def test_the_cli_lists_the_recipes_and_runs_one_printing_the_verdict_last(tmp_path) -> None:
    code, out, _ = run_main("recipe", "list")
    assert code == 0
    assert [line.split(":")[0] for line in out.splitlines() if not line.startswith(" ")] == list(
        RECIPES
    )
    store = tmp_path / "lab.sqlite"
    code, out, err = run_main(
        "recipe", "run", "edge_of_stability", "--store", store, "--max-steps", "30"
    )
    assert code == 0, err  # reproduced or not, a result
    lines = out.splitlines()
    assert lines[0].startswith("Edge of stability (Cohen et al., ICLR 2021): ")
    verdict = lines.index(next(line for line in lines if line.startswith("reproduced: ")))
    assert lines[verdict] in ("reproduced: yes", "reproduced: no")
    assert any(line.startswith("  plateau ratio = ") for line in lines[verdict:])
    assert err.count(" completed · ") == 2  # each run, as it ended
    with Store(store) as opened:
        assert len(opened.list_runs()) == 2


def test_the_cli_names_a_bad_recipe_or_length_and_trains_nothing(tmp_path) -> None:
    store = tmp_path / "lab.sqlite"
    code, out, err = run_main("recipe", "run", "nope", "--store", store)
    assert (code, out) == (2, "") and err.startswith("error: name: no recipe 'nope'")
    code, _, err = run_main("recipe", "run", "clipping", "--store", store, "--max-steps", "0")
    assert code == 2 and err == "error: max_steps: must be at least 1 (got 0)\n"
    assert not store.exists()


def test_the_cli_names_a_bad_probe_and_trains_nothing(tmp_path) -> None:
    store = tmp_path / "lab.sqlite"
    code, out, err = run_main(
        "recipe", "run", "projection", "--store", store, "--set", "radius=-1", "--seed", "2"
    )
    assert (code, out) == (2, "") and err.startswith("error: radius: must be in (0, 1e+06]")
    code, _, err = run_main("recipe", "run", "projection", "--store", store, "--set", "nope=1")
    assert code == 2 and "nope: is neither a run field nor a knob" in err
    code, _, err = run_main("recipe", "run", "projection", "--store", store, "--set", "radius")
    assert code == 2 and "must read KNOB=VALUE" in err
    assert not store.exists()
