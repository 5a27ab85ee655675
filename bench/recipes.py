"""`make recipes` (`python -m bench.recipes [--seeds N] [NAME ...]`): every recipe of
`core.recipes` run at seeds 0 … N−1 (5 by default) and its negative control at the same
seeds, each run on a fresh store; each verdict, its numbers and the runtimes written to
`recipes/results.md`, and the verdict table ("5/5", "control 0/5") copied into
`docs/recipes.md` (between `TABLE_START` and `TABLE_END`), which a test holds equal to the
file's."""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.machine import PROJECT_ROOT, describe, load_average
from core.engine import Engine
from core.recipes import RECIPES, Recipe, Verdict, run
from core.recipes.probe import Probe

RESULTS = PROJECT_ROOT / "recipes" / "results.md"
PAGE = PROJECT_ROOT / "docs" / "recipes.md"  # the recipes' page, with the table
TABLE_START = "<!-- recipes table: written by `make recipes` -->"
TABLE_END = "<!-- end of the recipes table -->"
# As many runs at once as `optlab recipe run` and the demo race train.
CONCURRENCY = 3
SEEDS = 5  # ≥ 4 of 5 seeds reproduce a finding that holds, and no control may say yes


@dataclass(frozen=True)
class Outcome:
    """One recipe's verdicts at each seed, its control's at the same seeds, and how long
    the published recipe's runs took at seed 0."""

    recipe: Recipe
    verdicts: Sequence[Verdict]
    controls: Sequence[Verdict]
    seconds: float

    def said(self, verdicts: Sequence[Verdict]) -> str:
        """`4/5`, with the inconclusive and unfinished ones named: how many said yes."""
        yes = sum(v.reproduced == "yes" for v in verdicts)
        text = f"{yes}/{len(verdicts)}"
        others = [
            f"{n} {word}"
            for word, n in (
                ("inconclusive", sum(v.reproduced == "inconclusive" for v in verdicts)),
                ("unfinished", sum(v.reproduced is None for v in verdicts)),
            )
            if n
        ]
        return f"{text} ({', '.join(others)})" if others else text


def run_all(recipes: Sequence[Recipe], seeds: int) -> list[Outcome]:
    """Runs each recipe, then its control, at each seed, each on a store of its own, one
    after the other, printing as it goes."""
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="optlab-recipes-") as folder:
        for recipe in recipes:
            verdicts, controls, seconds = [], [], 0.0
            for seed in range(seeds):
                verdict, took = run_once(recipe, Probe(seed), Path(folder), f"seed {seed}")
                verdicts.append(verdict)
                seconds = seconds or took
                control = recipe.control.probe(seed)
                controls.append(run_once(recipe, control, Path(folder), f"seed {seed} control")[0])
            outcomes.append(Outcome(recipe, verdicts, controls, seconds))
    return outcomes


def run_once(recipe: Recipe, probe: Probe, folder: Path, label: str) -> tuple[Verdict, float]:
    """`recipe` run as `probe` makes it, on a fresh store in `folder`: its verdict, and
    how long its runs took."""
    print(f"{recipe.name} {label}: running", flush=True)
    engine = Engine(folder / f"{recipe.name} {label}.sqlite", max_concurrent=CONCURRENCY)
    began = time.monotonic()
    try:
        verdict = run(recipe, engine, probe=probe)
    finally:
        engine.close()
    print(f"{recipe.name} {label}: {verdict.text()}", flush=True)
    return verdict, time.monotonic() - began


def table(outcomes: Sequence[Outcome]) -> str:
    """The verdict table: a row per recipe."""
    rows = [
        "| Recipe | Paper | Reproduced | Control | What was measured (seed 0) | Time |",
        "|---|---|---|---|---|---|",
    ]
    for outcome in outcomes:
        recipe = outcome.recipe
        sentence = outcome.verdicts[0].sentence.replace("|", "\\|")
        rows.append(
            f"| {recipe.title} | {recipe.paper.citation} | {outcome.said(outcome.verdicts)} "
            f"| {outcome.said(outcome.controls)} | {sentence} | {outcome.seconds:.0f} s |"
        )
    return "\n".join(rows)


def results_file(outcomes: Sequence[Outcome], machine: dict[str, str]) -> str:
    """`recipes/results.md`: the machine, the table, then each recipe's claim, measure,
    control, and every verdict in full."""
    seeds = len(outcomes[0].verdicts) if outcomes else 0
    held = sum(
        sum(v.reproduced == "yes" for v in o.verdicts) >= 0.8 * seeds
        and not any(v.reproduced == "yes" for v in o.controls)
        for o in outcomes
    )
    lines = [
        "# Recipes: results",
        "",
        "Written by `make recipes` (`python -m bench.recipes`); run it again to refresh, do "
        "not edit. Each recipe at seeds 0 to "
        f"{seeds - 1}, then its negative control at the same seeds (`optlab recipe run NAME "
        "--seed S [--control]`): Reproduced and Control count the verdicts that said yes.",
        "",
        "## Machine",
        "",
        *(f"- {label}: {value}" for label, value in machine.items()),
        "",
        f"## Verdicts: {held} of {len(outcomes)} reproduced at ≥ 80% of seeds, their "
        "controls never",
        "",
        table(outcomes),
        "",
    ]
    for outcome in outcomes:
        recipe = outcome.recipe
        lines += [
            f"### {recipe.title}",
            "",
            f"{recipe.paper.citation}. {recipe.claim}",
            "",
            f"Measure: {recipe.measure}",
            "",
            f"Control: {recipe.control.why} ({recipe.control.probe().text()})",
            "",
        ]
        for kind, verdicts in (("seed", outcome.verdicts), ("control, seed", outcome.controls)):
            for seed, verdict in enumerate(verdicts):
                lines += [f"{kind} {seed}:", "", "```", verdict.text(), "```", ""]
    return "\n".join(lines)


def with_table(page: str, new_table: str) -> str:
    """`page` with the text between its table markers replaced by `new_table`."""
    pattern = re.compile(f"{re.escape(TABLE_START)}\n(.*?\n)?{re.escape(TABLE_END)}", re.DOTALL)
    if not pattern.search(page):
        raise ValueError(f"{PAGE.name} lacks the markers {TABLE_START!r} … {TABLE_END!r}")
    return pattern.sub(lambda _: f"{TABLE_START}\n{new_table}\n{TABLE_END}", page)


def page_table(page: str) -> str:
    """The table between the page's markers."""
    start = page.index(TABLE_START) + len(TABLE_START) + 1
    return page[start : page.index(TABLE_END) - 1]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.recipes", description=__doc__)
    parser.add_argument("names", nargs="*", metavar="NAME", help="Recipes (default: all).")
    parser.add_argument("--seeds", type=int, default=SEEDS, metavar="N")
    args = parser.parse_args(argv)
    names = args.names or list(RECIPES)
    unknown = [name for name in names if name not in RECIPES]
    if unknown or args.seeds < 1:
        problem = f"no recipe {', '.join(unknown)}" if unknown else "--seeds: at least 1"
        print(f"error: {problem}; known: {', '.join(RECIPES)}")
        return 2
    machine = describe()  # the load at the start among it
    outcomes = run_all([RECIPES[name] for name in names], args.seeds)
    machine["Load average"] = f"{machine['Load average']} at the start, {load_average()} at the end"
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(results_file(outcomes, machine))
    if len(outcomes) == len(RECIPES):  # the page shows the whole gallery only
        PAGE.write_text(with_table(PAGE.read_text(), table(outcomes)))
    print(f"wrote {os.path.relpath(RESULTS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
