"""`make recipes` (`python -m bench.recipes`): every recipe of `core.recipes` run with its
default seeds, each on a fresh store, its verdict, numbers and runtime written to
`recipes/results.md`, and the verdict table copied into `docs/recipes.md` (between
`TABLE_START` and `TABLE_END`), which a test holds equal to the file's."""

from __future__ import annotations

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

RESULTS = PROJECT_ROOT / "recipes" / "results.md"
PAGE = PROJECT_ROOT / "docs" / "recipes.md"  # the recipes' page, with the table
TABLE_START = "<!-- recipes table: written by `make recipes` -->"
TABLE_END = "<!-- end of the recipes table -->"
# As many runs at once as `optlab recipe run` and the demo race train.
CONCURRENCY = 3


@dataclass(frozen=True)
class Outcome:
    """One recipe's verdict, and how long its runs took together."""

    recipe: Recipe
    verdict: Verdict
    seconds: float


def run_all(recipes: Sequence[Recipe]) -> list[Outcome]:
    """Runs each recipe on a store of its own, one after the other, printing as it goes."""
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="optlab-recipes-") as folder:
        for recipe in recipes:
            print(f"{recipe.name}: running", flush=True)
            engine = Engine(Path(folder) / f"{recipe.name}.sqlite", max_concurrent=CONCURRENCY)
            began = time.monotonic()
            try:
                verdict = run(recipe, engine)
            finally:
                engine.close()
            outcomes.append(Outcome(recipe, verdict, time.monotonic() - began))
            print(f"{recipe.name}: {verdict.text()}", flush=True)
    return outcomes


def table(outcomes: Sequence[Outcome]) -> str:
    """The verdict table: a row per recipe."""
    rows = ["| Recipe | Paper | Reproduced | What was measured | Time |", "|---|---|---|---|---|"]
    for outcome in outcomes:
        recipe, verdict = outcome.recipe, outcome.verdict
        reproduced = {True: "yes", False: "**no**", None: "unfinished"}[verdict.reproduced]
        sentence = verdict.sentence.replace("|", "\\|")
        rows.append(
            f"| {recipe.title} | {recipe.paper.citation} | {reproduced} | {sentence} "
            f"| {outcome.seconds:.0f} s |"
        )
    return "\n".join(rows)


def results_file(outcomes: Sequence[Outcome], machine: dict[str, str]) -> str:
    """`recipes/results.md`: the machine, the table, then each recipe's claim, measure and
    numbers in full."""
    reproduced = sum(o.verdict.reproduced is True for o in outcomes)
    lines = [
        "# Recipes: results",
        "",
        "Written by `make recipes` (`python -m bench.recipes`); run it again to refresh, do "
        "not edit.",
        "",
        "## Machine",
        "",
        *(f"- {label}: {value}" for label, value in machine.items()),
        "",
        f"## Verdicts: {reproduced} of {len(outcomes)} reproduced",
        "",
        table(outcomes),
        "",
    ]
    for outcome in outcomes:
        recipe, verdict = outcome.recipe, outcome.verdict
        lines += [
            f"### {recipe.title}",
            "",
            f"{recipe.paper.citation}. {recipe.claim}",
            "",
            f"Measure: {recipe.measure}",
            "",
            "```",
            verdict.text(),
            "```",
            "",
        ]
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
    names = list(sys.argv[1:] if argv is None else argv) or list(RECIPES)
    unknown = [name for name in names if name not in RECIPES]
    if unknown:
        print(f"error: no recipe {', '.join(unknown)}; known: {', '.join(RECIPES)}")
        return 2
    machine = describe()  # the load at the start among it
    outcomes = run_all([RECIPES[name] for name in names])
    machine["Load average"] = f"{machine['Load average']} at the start, {load_average()} at the end"
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(results_file(outcomes, machine))
    if len(outcomes) == len(RECIPES):  # the page shows the whole gallery only
        PAGE.write_text(with_table(PAGE.read_text(), table(outcomes)))
    print(f"wrote {os.path.relpath(RESULTS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
