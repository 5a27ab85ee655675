"""The results table, its notes, the final line, and the results file around them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bench.rows import Measured, Row

COLUMNS = ("#", "figure", "A", "B", "ratio A/B", "target", "met")

METHOD = """\
Every ratio compares A with B measured in the same run, interleaved A B A B …, so that
both samples of a pair see the same machine; {dropped} dropped as warm-up, and each
figure keeps the next {pairs}. A and B are medians of their samples; the ratio is the
median of the pairs' own ratios, which cancels drift that both samples of a pair saw (so
it need not equal A / B); in brackets, the interquartile range of those ratios, and the
pairs kept. A ratio target is met only when that whole range meets it; a figure whose
range straddles its target takes more pairs, up to {most}, until the range lies on one
side, and one without a ratio target takes more while its range is wider than a tenth of
its ratio. A figure held to an absolute bound is the median of timed calls after a warm
one. A missed target comes with a note on where the time goes, from a profile taken after
the figure."""


def table(rows: Sequence[Row]) -> str:
    """The rows as a Markdown table whose columns line up in plain text too."""
    cells = [COLUMNS, *(_cells(row) for row in rows)]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]

    def line(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(cells[0]), rule, *(line(values) for values in cells[1:])])


def notes(rows: Sequence[Row]) -> list[str]:
    """One line per row that has something to add: its details, and for a row that is
    not met, why (not measured, failed, or where the time goes)."""
    lines = []
    for row in rows:
        parts = ["Missed."] if row.met is False and row.measured else []
        if row.note:
            parts.append(row.note)
        if row.measured and row.measured.detail:
            parts.append(row.measured.detail)
        if parts:
            lines.append(f"- {row.label}: {' '.join(parts)}")
    return lines


def summary(rows: Sequence[Row]) -> str:
    """`bench: N/M targets met`, where M counts the rows that have a target."""
    judged = [row.met for row in rows if row.met is not None]
    return f"bench: {sum(judged)}/{len(judged)} targets met"


def results_file(
    rows: Sequence[Row],
    *,
    machine: Mapping[str, str],
    pairs: int,
    most: int,
    warmup: int,
    seconds: float,
) -> str:
    """The text of `bench/results.md`."""
    lines = [
        "# Benchmark results",
        "",
        "Written by `make bench` (`python -m bench`); run it again to refresh, do not edit.",
        "",
        "## Machine",
        "",
        *(f"- {label}: {value}" for label, value in machine.items()),
        "",
        "## Method",
        "",
        METHOD.format(pairs=pairs, most=most, dropped=_dropped(warmup)),
        "",
        "## Results",
        "",
        table(rows),
        "",
    ]
    row_notes = notes(rows)
    if row_notes:
        lines += ["Notes:", "", *row_notes, ""]
    lines += [f"The bench took {duration(seconds)}.", "", summary(rows), ""]
    return "\n".join(lines)


def duration(seconds: float) -> str:
    """`"4 min 12 s"`, or `"38.2 s"` under a minute."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


def _dropped(warmup: int) -> str:
    if warmup == 0:
        return "no pair is"
    return "the first pair is" if warmup == 1 else f"the first {warmup} pairs are"


def _cells(row: Row) -> tuple[str, ...]:
    measured = row.measured
    met = {None: "—", True: "yes", False: "no"}[row.met]
    return (
        row.label,
        row.name,
        str(measured.a) if measured else "—",
        str(measured.b) if measured and measured.b else "—",
        _ratio(measured) if measured and measured.ratio else "—",
        str(row.target) if row.target else "—",
        met,
    )


def _ratio(measured: Measured) -> str:
    """E.g. `"0.87× (0.86–0.87), 5 pairs"`."""
    text = f"{measured.ratio:.2f}×"
    if measured.spread is not None:
        text += f" ({measured.spread[0]:.2f}–{measured.spread[1]:.2f})"
    return text if measured.pairs is None else f"{text}, {measured.pairs} pairs"
