"""The commands that steer a run that trains in any process, through the store: `stop`,
`pause` and `set`; their parsers beside their handler."""

from __future__ import annotations

import argparse

from core.cli.exits import EXIT_FAILED, EXIT_OK, UsageError, report
from core.cli.flags import Common, Subparsers, add_knob_flags, add_task_weight_flag, given_changes
from core.cli.opening import open_store
from core.engine.client import EngineClient
from core.store import UnknownRunError
from core.training.live import task_weight

#: How long `stop`, `pause` and `set` wait for the run's process to carry them out: it
#: takes commands between two steps, so a step longer than this one times out.
STEER_SECONDS = 60.0


def add_steering(commands: Subparsers, common: Common) -> None:
    """`stop`, `pause` and `set`: whichever process trains the run carries them out."""
    trainer = "the dashboard's engine, another terminal's `train`, or a script's LabCallback"
    for name, verb in (("stop", "Stop"), ("pause", "Pause")):
        command = commands.add_parser(
            name,
            parents=[common.store],
            help=f"{verb} a run that trains, in any process.",
            description=f"{verb} a run that trains in any process ({trainer}), after its "
            "current step; returns once that process has done it. `resume RUN_ID` "
            "unpauses a paused run.",
        )
        command.add_argument("run_id", metavar="RUN_ID", help="The run, as `runs` lists it.")
        if name == "pause":
            command.add_argument(
                "--at-step",
                type=int,
                metavar="STEP",
                help="Pause once the run has taken step STEP (at once if it is past it), "
                "with a checkpoint of that step: to compare runs at one step, or fork one "
                "from it.",
            )
        command.set_defaults(command=name, handler=steer)
    knobs = commands.add_parser(
        "set",
        parents=[common.store],
        help="Change live knobs of a run that trains, in any process, from its next step.",
        description=f"Change live knobs of a run that trains in any process ({trainer}) "
        "from its next step, each recorded as an event at that step; returns once that "
        "process has taken the change.",
    )
    knobs.add_argument("run_id", metavar="RUN_ID", help="The run, as `runs` lists it.")
    add_task_weight_flag(knobs.add_argument_group("multi-task runs"), "Live.")
    add_knob_flags(knobs, common.specs, live_only=True)
    knobs.set_defaults(command="set", handler=steer)


def steer(args: argparse.Namespace) -> int:
    """`stop`, `pause` or `set`: writes the command for the process that trains the run
    and waits until that process has carried it out (or refused it, saying why)."""
    with open_store(args.store, must_exist=True) as store:
        client = EngineClient(store)
        try:
            if args.command == "set":
                changes = given_changes(args)
                weights = changes.pop("task_weights", [])
                changes |= {task_weight(task): weight for task, weight in weights}
                if not changes:
                    raise UsageError("set: give at least one knob, e.g. --lr 0.01")
                command = client.update(args.run_id, **changes)
            elif args.command == "pause" and args.at_step is not None:
                if args.at_step < 0:
                    raise UsageError(f"at_step: must be a whole number ≥ 0 (got {args.at_step})")
                command = client.pause(args.run_id, at_step=args.at_step)
            else:
                command = getattr(client, args.command)(args.run_id)
        except UnknownRunError:
            raise UsageError(f"run_id: no run {args.run_id!r} in {store.name}") from None
        done = client.settle(command, STEER_SECONDS)
        step = client.status(args.run_id).step
    if done.handled is None:
        report(f"the process that trains run {args.run_id} did not answer in {STEER_SECONDS:g} s")
        return EXIT_FAILED
    if done.error is not None:
        report(f"refused: {done.error}")
        return EXIT_FAILED
    what = ", ".join(f"{k} → {v}" for k, v in command.payload.get("knobs", {}).items())
    if "at_step" in command.payload:
        what = f"pauses at step {command.payload['at_step']}"
    print(f"run {args.run_id}: {what or args.command} (taken at step {step})")
    return EXIT_OK
