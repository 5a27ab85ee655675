"""A recipe end to end, shortened: its runs started on an engine, tagged, waited for,
and judged from what they stored."""

from __future__ import annotations

import math

from core.engine import Engine
from core.recipes import RECIPES, Launch, run, start, verdict
from core.recipes.runner import TAG_PREFIX
from core.store import Store
from tests.cli import run_main


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
