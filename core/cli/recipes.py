"""`recipe list` and `recipe run NAME`: the published findings the lab reproduces (see
`core.recipes`), from the command line; each one's parser beside its handler."""

from __future__ import annotations

import argparse
import sys

from core.cli.exits import EXIT_OK, UsageError
from core.cli.flags import Common, Subparsers
from core.cli.opening import open_engine
from core.engine import RunStatus
from core.recipes import RECIPES, Recipe, Verdict, run
from core.recipes.probe import SEED_STRIDE, Probe, assignment
from core.recipes.runner import configs

#: Runs of a recipe trained at once: as many as the demo race's, on 2 cores.
RECIPE_CONCURRENCY = 3


def add_recipe(commands: Subparsers, common: Common) -> None:
    """`recipe`, with its two subcommands."""
    command = commands.add_parser(
        "recipe",
        help="Reproduce a published optimizer finding, checked on what the runs store.",
        description="The classic optimizer findings, each reproduced by the lab's own runs "
        "and judged from their stored metrics: `recipe list` names them, `recipe run NAME` "
        "trains its runs and prints the verdict last.",
    )
    actions = command.add_subparsers(title="actions", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="Every recipe: its paper, claim and measure.")
    listing.set_defaults(command="recipe", handler=list_recipes)
    running = actions.add_parser(
        "run",
        parents=[common.store, common.cluster],
        help="Train a recipe's runs; print each as it ends, then the verdict.",
        description="Train a recipe's runs (as groups of repeats, tagged recipe:NAME, which "
        "the dashboard shows), printing each run as it ends and the verdict so far, then "
        "the final verdict last: `reproduced: yes|no` and the numbers it rests on. Exits 0 "
        "whether or not the finding reproduced: a failure to reproduce is a result.",
    )
    running.add_argument("name", metavar="NAME", help="The recipe, as `recipe list` names it.")
    running.add_argument(
        "--max-steps",
        type=int,
        metavar="N",
        help="Cut every run at N steps: a quick look, whose verdict may differ.",
    )
    probing = running.add_argument_group(
        "trying to break it",
        "Run the recipe otherwise than as published; the verdict is "
        "the same measure, with the recipe's stated numbers.",
    )
    probing.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="S",
        help=f"Other runs of the same recipe: every run's seed moved by S × {SEED_STRIDE} "
        "(0, the default: as published).",
    )
    probing.add_argument(
        "--set",
        action="append",
        default=[],
        type=_assignment,
        metavar="KNOB=VALUE",
        dest="overrides",
        help="A run field (batch_size=128) or an optimizer knob (radius=1000) set on every "
        "arm that has it; again for more.",
    )
    probing.add_argument(
        "--control",
        action="store_true",
        help="Run its negative control: a setting under which the finding must vanish "
        "(`recipe list` names each); --set adds to it.",
    )
    running.set_defaults(command="recipe", handler=run_recipe)


def list_recipes(args: argparse.Namespace) -> int:
    """Prints each recipe: its name and title, paper, claim, measure and runtime."""
    for recipe in RECIPES.values():
        print(f"{recipe.name}: {recipe.title} ({recipe.paper.citation})")
        print(f"  claim: {recipe.claim}")
        print(f"  measure: {recipe.measure}")
        print(f"  control (--control): {recipe.control.why} ({recipe.control.probe().text()})")
        print(f"  about {recipe.runtime_s:.0f} s on 2 CPU cores")
    return EXIT_OK


def run_recipe(args: argparse.Namespace) -> int:
    """Trains a recipe's runs, as published or probed, in an engine of its own and prints
    its verdict."""
    recipe = _recipe(args.name)
    if args.max_steps is not None and args.max_steps < 1:
        raise UsageError(f"max_steps: must be at least 1 (got {args.max_steps})")
    overrides = {**recipe.control.overrides} if args.control else {}
    overrides |= dict(args.overrides)
    probe = Probe(args.seed, overrides)
    configs(recipe, args.max_steps, probe)  # `InvalidInput` before a store opens: exit 2
    print(f"{recipe.title} ({recipe.paper.citation}): {recipe.claim}")
    print(f"measure: {recipe.measure}")
    if args.control:
        print(f"control: {recipe.control.why}")
    if not probe.published:
        print(f"probed: {probe.text()}")
    sys.stdout.flush()
    engine = open_engine(args, max_concurrent=RECIPE_CONCURRENCY, must_exist=False)
    try:
        verdict = run(recipe, engine, max_steps=args.max_steps, probe=probe, progress=_progress)
    finally:
        engine.close()
    print(verdict.text(), flush=True)
    return EXIT_OK


def _assignment(text: str) -> tuple[str, str]:
    """`probe.assignment`, its refusal as argparse reports a flag's."""
    try:
        return assignment(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _recipe(name: str) -> Recipe:
    if name not in RECIPES:
        raise UsageError(
            f"name: no recipe {name!r}; `recipe list` names them: {', '.join(RECIPES)}"
        )
    return RECIPES[name]


def _progress(status: RunStatus, so_far: Verdict) -> None:
    """One line on stderr per run that ends, with how many have."""
    print(
        f"run {status.id} ({status.name}) {status.status} · {so_far.ended}/{so_far.total}",
        file=sys.stderr,
        flush=True,
    )
