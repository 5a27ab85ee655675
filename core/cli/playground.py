"""`playground SURFACE`: one of the lab's optimizers on a 2-D loss surface (see
`core.playground`), from the command line; its parser beside its handler."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from core.cli.exits import EXIT_OK
from core.cli.flags import Common, Subparsers
from core.cli.quiet import native_output_hidden
from core.knobs import InvalidInput, read_number
from core.playground import DEFAULT_STEPS, MAX_STEPS, SURFACES, trajectory
from core.playground.trajectory import checked
from core.recipes.probe import assignment


def add_playground(commands: Subparsers, common: Common) -> None:
    """`playground`."""
    del common
    command = commands.add_parser(
        "playground",
        help="Step an optimizer on a 2-D loss surface; print where it ends.",
        description="Step one of the lab's optimizers (its own Keras class, with its knobs) "
        "on a 2-D loss surface, in a fraction of a second, without a run or a store: "
        "prints the last point and its loss, or with --json every point. Exits 0 whether "
        "or not the path diverged (left the surface's bounds, or stopped being finite), "
        "2 on bad input.",
    )
    command.add_argument("surface", metavar="SURFACE", help=f"The surface: {', '.join(SURFACES)}.")
    command.add_argument(
        "--optimizer", required=True, metavar="NAME", help="The optimizer, as `catalog` names it."
    )
    command.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KNOB=VALUE",
        dest="knobs",
        help="A knob of the optimizer (learning_rate=0.01, radius=1); again for more; the "
        "others keep their defaults.",
    )
    command.add_argument(
        "--start",
        metavar="X,Y",
        help="Where the path starts, within the surface's bounds (default: the surface's "
        "own start); a negative X after an equals sign: --start=-1.2,1.",
    )
    command.add_argument(
        "--steps",
        default=str(DEFAULT_STEPS),
        metavar="N",
        help=f"How many steps, 1 to {MAX_STEPS:,} (default: {DEFAULT_STEPS}).",
    )
    command.add_argument(
        "--json",
        action="store_true",
        help='Print {"surface", "optimizer", "knobs", "points": [[x, y], ...] (the start '
        'first, one a step), "losses", "projected", "clipped", "diverged", "diverged_at"}.',
    )
    command.set_defaults(command="playground", handler=playground)


def playground(args: argparse.Namespace) -> int:
    """Steps the optimizer; prints the last point and loss, or the whole path as JSON."""
    knobs, errors = {}, {}
    for text in args.knobs:
        try:
            name, value = assignment(text)
        except ValueError as exc:
            errors["set"] = str(exc)
        else:
            knobs[name] = value
    start = None
    if args.start is not None:
        try:
            start = _pair(args.start)
        except ValueError as exc:
            errors["start"] = str(exc)
    steps: int | float = DEFAULT_STEPS
    try:
        steps = read_number(args.steps)  # `checked` refuses a float, naming the field
    except ValueError as exc:
        errors["steps"] = str(exc)
    try:  # every input checked before TensorFlow is imported
        checked(args.surface, args.optimizer, knobs, start, steps)
    except InvalidInput as exc:
        errors = exc.errors | errors  # a flag that did not read: its own reason
    if errors:
        raise InvalidInput(errors)
    with native_output_hidden():  # TensorFlow's start-up lines, XLA's when it compiles
        path = trajectory(args.surface, args.optimizer, knobs, start, int(steps))
    if args.json:
        print(json.dumps(path.to_json(), allow_nan=False), flush=True)
        return EXIT_OK
    taken = len(path.points) - 1
    print(
        f"{path.surface}, {path.optimizer}: {taken} step{'' if taken == 1 else 's'} "
        f"from {_shown(path.points[0])}"
    )
    print(f"last point {_shown(path.points[-1])}, loss {path.losses[-1]:.6g}")
    if path.divergence:
        print(path.divergence)
    return EXIT_OK


def _pair(text: str) -> tuple[float, float]:
    """`X,Y` as two numbers."""
    parts = text.split(",")
    if len(parts) != 2:
        raise ValueError(f"must read X,Y (got {text!r})")
    return float(read_number(parts[0], real=True)), float(read_number(parts[1], real=True))


def _shown(point: Sequence[float]) -> str:
    return f"({point[0]:.6g}, {point[1]:.6g})"
