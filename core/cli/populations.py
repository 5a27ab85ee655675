"""`optlab pbt`: population-based training, driven here on this process's engine.

    optlab pbt --population 4 --interval 40 --generations 5 \\
        --param learning_rate=0.001:0.3:log --dataset digits --model mlp --optimizer sgd

Prints each member as it starts, each exploit as it happens (who copied whom, at which
step, with which knobs), then the members' final objective values, best first; Ctrl-C
stops the population and its runs.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import time
from typing import TextIO

import numpy as np

from core.cli.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, UsageError
from core.cli.flags import Common, Subparsers, add_training_command, run_config
from core.cli.opening import open_engine, open_store
from core.cli.sweeping import PARAM_FORMS, parse_params
from core.engine.client import EngineClient
from core.population import Population, PopulationPlan
from core.population.plan import DEFAULT_PERTURB
from core.readable import number
from core.sweep import MAX_SEED
from core.sweep.objective import OBJECTIVE_NAMES, TIME_TO_TARGET

#: Seconds between two looks at the population.
POLL_SECONDS = 0.25


def add_pbt(commands: Subparsers, common: Common) -> None:
    """`pbt`, with the population's flags."""
    command = add_training_command(
        commands,
        common,
        "pbt",
        help="Population-based training: members that copy the best and perturb its knobs.",
        description="Train a population of runs of the config the run flags give, all at "
        "once. At the end of every interval but the last, the bottom quantile of members "
        "(by the objective on validation at that step) continue from the checkpoint of a "
        "top member, as forks, with each --param knob perturbed or drawn afresh: the "
        "population finds a schedule of the knobs, not a constant. Ctrl-C stops it.",
    )
    group = command.add_argument_group("population")
    group.add_argument(
        "--param",
        dest="params",
        action="append",
        default=[],
        metavar="SPEC",
        help="A live knob of the optimizer to search, a range NAME=LOW:HIGH "
        "(NAME=LOW:HIGH:log on a log scale). Repeat for each.",
    )
    group.add_argument("--population", type=int, default=4, metavar="N", help="Members (4).")
    group.add_argument(
        "--interval", type=int, required=True, metavar="STEPS", help="Steps between exploits."
    )
    group.add_argument(
        "--generations", type=int, required=True, metavar="G", help="Intervals a member trains."
    )
    group.add_argument(
        "--quantile",
        type=float,
        default=0.25,
        metavar="Q",
        help="The share of members at each end of the ranking (0.25).",
    )
    group.add_argument(
        "--perturb",
        default=",".join(f"{f:g}" for f in DEFAULT_PERTURB),
        metavar="F,F",
        help="The factors a copied knob is multiplied by, one drawn each time (0.8,1.2).",
    )
    group.add_argument(
        "--resample",
        type=float,
        default=0.25,
        metavar="P",
        help="The probability that a copied knob is drawn afresh from its range (0.25).",
    )
    group.add_argument(
        "--objective",
        choices=[name for name in OBJECTIVE_NAMES if name != TIME_TO_TARGET],
        help="What ranks the members at each interval's end (default: the dataset's metric).",
    )
    group.add_argument(
        "--population-seed",
        type=int,
        metavar="S",
        help="Seeds the starting knobs and every move (default: a random one).",
    )
    group.add_argument(
        "--detach",
        action="store_true",
        help="Hand the population to the engine that serves the store (the dashboard's, "
        "or optlab serve) and return: that engine drives it, through a restart of the "
        "dashboard or of itself; watch it on the Sweep page (Populations).",
    )
    command.set_defaults(command="pbt", handler=pbt)


def pbt(args: argparse.Namespace) -> int:
    """Checks the population's plan (bad input writes nothing), then trains it in an
    engine of its own that trains every member at once. Returns the exit status."""
    if not args.params:
        raise UsageError(f"param: give at least one --param {PARAM_FORMS}")
    if args.ray_address and args.detach:
        raise UsageError(
            "ray_address: with --detach, the serving engine trains the members where it "
            "trains its runs (its own --ray-address)"
        )
    perturb = _factors(args.perturb)
    seed = secrets.randbelow(MAX_SEED + 1) if args.population_seed is None else args.population_seed
    plan = PopulationPlan.create(
        run_config(args),
        parse_params(args.params),
        population=args.population,
        interval=args.interval,
        generations=args.generations,
        objective=args.objective,
        quantile=args.quantile,
        perturb=perturb,
        resample=args.resample,
        seed=seed,
    )
    name = plan.config.name or f"pbt-{time.strftime('%Y%m%d-%H%M%S')}"
    if args.detach:
        return _hand_over(args, plan, name)
    engine = open_engine(args, max_concurrent=plan.population, must_exist=False)
    try:
        population = Population(engine, plan, name)
        population.start()
        return _follow(population, sys.stdout)
    finally:
        engine.close()


def _hand_over(args: argparse.Namespace, plan: PopulationPlan, name: str) -> int:
    """Starts the members through the store's serving engine, which drives the population
    (`core.population.hosting`); prints its name and members."""
    with open_store(args.store, must_exist=True) as store:
        client = EngineClient(store)
        if client.engine() is None:
            raise UsageError(
                f"detach: no engine serves {store.name}: start the dashboard (make run) "
                "or optlab serve, or leave out --detach to train here"
            )
        population = Population(client, plan, name)
        population.submit()
        print(f"population {name}: handed to the serving engine", flush=True)
        for member, run_id in enumerate(population.members):
            print(f"  m{member}: run {run_id}", flush=True)
    return EXIT_OK


def _factors(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(part) for part in text.split(","))
    except ValueError:
        raise UsageError(f"perturb: {text!r} is not factors like 0.8,1.2") from None


def _follow(population: Population, out: TextIO) -> int:
    """Prints the members, each exploit as it happens and the end; the exit status."""
    plan = population.plan
    print(
        f"population {population.name}: {plan.population} members × {plan.generations} "
        f"intervals of {plan.interval} steps, ranked by {plan.objective.metric} "
        f"({plan.objective.direction}d), seed {plan.seed}",
        file=out,
        flush=True,
    )
    for member, run_id in enumerate(population.members):
        print(f"  m{member}: run {run_id} {_knobs(population, run_id)}", file=out, flush=True)
    shown, interrupted = 0, False
    while population.active:
        try:
            shown = _print_moves(population, shown, out)
            time.sleep(POLL_SECONDS)
        except KeyboardInterrupt:
            print(f"stopping population {population.name} (Ctrl-C)", file=sys.stderr, flush=True)
            population.stop()
            interrupted = True
    status = population.wait()
    _print_moves(population, shown, out)
    for line in _ranking(population):
        print(line, file=out, flush=True)
    if status == "failed":
        print(f"population {population.name} failed: {population.error}", file=out, flush=True)
        return EXIT_FAILED
    return EXIT_INTERRUPTED if interrupted or status == "stopped" else EXIT_OK


def _print_moves(population: Population, shown: int, out: TextIO) -> int:
    moves = population.moves[shown:]
    for move in moves:
        knobs = ", ".join(f"{name} {number(value)}" for name, value in move.knobs.items())
        print(
            f"step {move.step}: m{move.member} copies m{move.source_member} "
            f"(run {move.run}, a fork of {move.source}) with {knobs}",
            file=out,
            flush=True,
        )
    return shown + len(moves)


def _knobs(population: Population, run_id: str) -> str:
    run = population.engine.status(run_id)
    return ", ".join(f"{axis.name} {number(run.knobs[axis.name])}" for axis in population.plan.axes)


def _ranking(population: Population) -> list[str]:
    """The members' last validated objective values, best first."""
    metric = population.plan.objective.metric
    rows = []
    for member, run_id in enumerate(population.members):
        metrics = population.engine.metrics(run_id)
        values = metrics[metric][~np.isnan(metrics[metric])] if metric in metrics else []
        rows.append((member, run_id, float(values[-1]) if len(values) else None))
    maximize = population.plan.objective.direction == "maximize"
    scored = sorted(
        (row for row in rows if row[2] is not None),
        key=lambda row: -row[2] if maximize else row[2],
    )
    lines = [f"{metric} at the end, best first:"]
    lines += [f"  m{m}: run {run_id}  {value:.4f}" for m, run_id, value in scored]
    lines += [f"  m{m}: run {run_id}  none" for m, run_id, value in rows if value is None]
    return lines
