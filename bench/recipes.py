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


HEADER = (
    "| Recipe | Paper | Reproduced | Control | What was measured (seed 0) | Time |",
    "|---|---|---|---|---|---|",
)


def row(outcome: Outcome) -> str:
    """A recipe's row of the verdict table."""
    recipe = outcome.recipe
    sentence = outcome.verdicts[0].sentence.replace("|", "\\|")
    return (
        f"| {recipe.title} | {recipe.paper.citation} | {outcome.said(outcome.verdicts)} "
        f"| {outcome.said(outcome.controls)} | {sentence} | {outcome.seconds:.0f} s |"
    )


def table(outcomes: Sequence[Outcome]) -> str:
    """The verdict table: a row per recipe."""
    return "\n".join([*HEADER, *(row(outcome) for outcome in outcomes)])


def section(outcome: Outcome) -> str:
    """A recipe's section of `recipes/results.md`: its claim, measure, control, and every
    verdict in full."""
    recipe = outcome.recipe
    lines = [
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


def results_file(
    rows: Sequence[str], sections: Sequence[str], machine: Sequence[str], seeds: int
) -> str:
    """`recipes/results.md`: the machine (`machine`, its lines), the table of `rows`, then
    each recipe's section."""
    held = sum(_held(line, seeds) for line in rows)
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
        *machine,
        "",
        f"## Verdicts: {held} of {len(rows)} reproduced at ≥ 80% of seeds, their controls never",
        "",
        *HEADER,
        *rows,
        "",
    ]
    return "\n".join(lines) + "\n" + "".join(sections)


def _held(table_row: str, seeds: int) -> bool:
    """Whether a table row's recipe said yes at ≥ 80% of its seeds and its control never."""
    reproduced, control = table_row.split(" | ")[2:4]
    return int(reproduced.split("/")[0]) >= 0.8 * seeds and control.startswith("0/")


def merged(existing: str, outcomes: Sequence[Outcome], machine: Sequence[str]) -> str:
    """`existing` results with the recipes of `outcomes` run again: their rows and
    sections replaced (or added, in the gallery's order), the others kept as they were,
    the machine's lines of the run that wrote them kept too, and `machine`'s added."""
    head, *chunks = existing.split("\n### ")
    old_sections = {chunk.split("\n", 1)[0]: "### " + chunk for chunk in chunks}
    old_rows = {
        line.split(" | ")[0][2:]: line
        for line in head.splitlines()
        if line.startswith("| ") and not line.startswith(HEADER[0][:10])
    }
    new = {outcome.recipe.title: outcome for outcome in outcomes}
    titles = [r.title for r in RECIPES.values() if r.title in new or r.title in old_rows]
    rows = [row(new[t]) if t in new else old_rows[t] for t in titles]
    sections = [
        section(new[t]) + "\n" if t in new else old_sections[t].rstrip("\n") + "\n\n"
        for t in titles
    ]
    machine_then = head.split("## Machine\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    seeds = len(outcomes[0].verdicts)
    names = ", ".join(outcome.recipe.name for outcome in outcomes)
    said = f"- {names} run again:"
    if said in machine_then:  # an earlier run of the same recipes: superseded
        at = machine_then.index(said)
        end = next(
            (i for i in range(at + 1, len(machine_then)) if not machine_then[i].startswith("  ")),
            len(machine_then),
        )
        machine_then = machine_then[:at] + machine_then[end:]
    again = [said, *(f"  {line}" for line in machine)]
    return results_file(rows, sections, [*machine_then, *again], seeds)


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
    lines = [f"- {label}: {value}" for label, value in machine.items()]
    RESULTS.parent.mkdir(exist_ok=True)
    if len(outcomes) < len(RECIPES) and RESULTS.exists():  # the others as they were
        written = merged(RESULTS.read_text(), outcomes, lines)
    else:
        written = results_file(
            [row(o) for o in outcomes], [section(o) + "\n" for o in outcomes], lines, args.seeds
        )
    RESULTS.write_text(written)
    rows = [line for line in written.splitlines() if line.startswith("| ") and line != HEADER[0]]
    if len(rows) == len(RECIPES):  # the page shows the whole gallery only
        PAGE.write_text(with_table(PAGE.read_text(), "\n".join([*HEADER, *rows])))
    print(f"wrote {os.path.relpath(RESULTS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
