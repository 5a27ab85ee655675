"""`python -m bench`: measure the figures, print the table, write `bench/results.md`.

    python -m bench                 # every figure; writes bench/results.md
    python -m bench --only 3,4      # some figures; prints only (or --results PATH)
    python -m bench --quick         # small workloads, fewer pairs: a smoke test

The last line printed is `bench: N/M targets met`. The exit status is 0 whatever the
figures say (a missed target is a result, not an error); it is 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from bench import machine, report
from bench.figures import FIGURES, FULL, QUICK, Figure, Settings, select
from bench.rows import NotMeasured, Row

RESULTS = Path(__file__).resolve().parent / "results.md"
# Fewer pairs than this are not results, whatever else the run measured.
MIN_PAIRS = 5


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the bench as the command line `argv` says; returns the exit status."""
    args = _parser().parse_args(argv)
    # Figures import TensorFlow when they run, after this: its start-up chatter on stderr
    # would bury the progress lines.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    settings = QUICK if args.quick else FULL
    if args.pairs is not None:
        most = max(settings.most or 0, args.pairs)
        settings = dataclasses.replace(settings, pairs=args.pairs, most=most)
    figures = select(args.only)
    # Only a full run replaces the results file by default: a partial or quick one would
    # overwrite real results with fewer, or rougher, numbers.
    complete = not args.quick and args.only is None and settings.pairs >= MIN_PAIRS
    results = args.results or (RESULTS if complete else None)

    description = machine.describe()
    started = time.perf_counter()
    rows = [_measure(figure, settings) for figure in figures]
    seconds = time.perf_counter() - started
    # Others' work on a shared machine slows A and B alike, but it is worth knowing.
    description["Load average"] = (
        f"{description['Load average']} at the start, {machine.load_average()} at the end"
    )

    print(report.table(rows))
    row_notes = report.notes(rows)
    if row_notes:
        print("\n" + "\n".join(row_notes))
    if results is not None:
        results.write_text(
            report.results_file(
                rows,
                machine=description,
                pairs=settings.pairs,
                most=settings.most or settings.pairs,
                warmup=settings.warmup,
                seconds=seconds,
            ),
            encoding="utf-8",
        )
        print(f"\nWrote {results}.")
    print(f"The bench took {report.duration(seconds)}.")
    print(report.summary(rows))
    return 0


def _measure(figure: Figure, settings: Settings) -> Row:
    """The figure's row; a figure that raises is reported as not measured, not fatal."""
    _progress(f"{figure.label}: {figure.name}")
    started = time.perf_counter()
    unmeasured = functools.partial(Row, figure.label, figure.name, figure.target, None)
    try:
        measured = figure.load()(dataclasses.replace(settings, target=figure.target))
    except NotMeasured as exc:
        row = unmeasured(f"Not measured: {exc}.")
    except Exception as exc:
        traceback.print_exc()  # the whole story on stderr; the table gets its first line
        first_line = str(exc).partition("\n")[0]
        row = unmeasured(f"Failed: {type(exc).__name__}: {first_line}")
    else:
        row = Row(figure.label, figure.name, figure.target, measured)
        if row.met is False and measured.diagnose is not None:
            _progress(f"{figure.label}: missed; profiling where the time goes")
            row = dataclasses.replace(row, note=_diagnosis(measured.diagnose))
    verdict = {None: "no target", True: "met", False: "missed"}[row.met]
    _progress(f"{figure.label}: {verdict} ({report.duration(time.perf_counter() - started)})")
    return row


def _diagnosis(diagnose: Callable[[], str]) -> str:
    try:
        return diagnose()
    except Exception as exc:
        traceback.print_exc()
        return f"(Profiling it failed: {type(exc).__name__}: {exc}.)"


def _progress(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description="Measure Optimizer Lab against plain Keras."
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"small workloads and {QUICK.pairs} pairs: checks that the bench runs",
    )
    parser.add_argument(
        "--only",
        type=_numbers,
        metavar="N,M",
        help="run only these figures (numbers: "
        + ", ".join(dict.fromkeys(str(f.number) for f in FIGURES))
        + ")",
    )
    parser.add_argument(
        "--pairs",
        type=_positive,
        metavar="N",
        help=f"measured pairs per comparison (default {FULL.pairs}, quick {QUICK.pairs})",
    )
    parser.add_argument(
        "--results",
        type=Path,
        metavar="PATH",
        help=f"write the results file here (default: {RESULTS.name} next to the bench, "
        f"for a full run of at least {MIN_PAIRS} pairs only)",
    )
    return parser


def _numbers(text: str) -> list[int]:
    try:
        numbers = [int(part) for part in text.split(",")]
    except ValueError:
        message = f"must be figure numbers separated by commas (got {text!r})"
        raise argparse.ArgumentTypeError(message) from None
    try:
        select(numbers)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return numbers


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (got {text!r})")
    return value


if __name__ == "__main__":
    sys.exit(main())
