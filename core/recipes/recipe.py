"""`Recipe`: a published optimizer finding, as the runs that reproduce it and the test of
its claim on what they stored.

A recipe declares its paper, its claim in one sentence, its measure (what is compared,
stated before anything runs), the runs it needs as `Arm`s (a config, trained `repeats`
times over seeds as one group), the charts to look at, and how long it takes. Its
`verdict` reads only the stored results of its runs (`RunResult`): it says whether the
claim held, with the numbers it rests on. It also works on the runs that have ended so
far, for a view that fills in as they end (see `core.recipes.runner`).

Declaring and judging import no TensorFlow: the dashboard lists recipes and reads their
verdicts without it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from core.readable import number
from core.recipes.probe import Probe
from core.store import Metrics
from core.training.config import INSTRUMENT_FIELDS, RunConfig


@dataclass(frozen=True)
class Table:
    """A grid of results a recipe shows as a heatmap: `values[i, j]` at `rows[i]` and
    `columns[j]` (NaN: not ended yet), named for its axes and what it holds."""

    values: np.ndarray
    rows: Sequence[float]
    columns: Sequence[float]
    row_name: str
    column_name: str
    value_name: str


@dataclass(frozen=True)
class Paper:
    """Where a finding was published."""

    authors: str  # "Cohen, Kaur, Li, Kolter & Talwalkar"
    year: int | None  # None: not a dated publication (the lab's own projected_gd)
    venue: str  # "ICLR"
    title: str

    @property
    def citation(self) -> str:
        """`Cohen et al., ICLR 2021`: the first author's surname, the venue and year."""
        first = self.authors.split(",")[0].split("&")[0].strip()
        many = "," in self.authors or "&" in self.authors
        year = "" if self.year is None else f" {self.year}"
        return f"{first}{' et al.' if many else ''}, {self.venue}{year}"


@dataclass(frozen=True)
class Arm:
    """One config of a recipe, trained `repeats` times (seeds seed … seed + repeats − 1,
    as one group of repeats when more than one). `key` is how the verdict names it."""

    key: str
    config: RunConfig
    repeats: int = 1


@dataclass(frozen=True)
class Control:
    """A recipe's negative control: `overrides`, set on every arm, take away what its
    finding rests on (`why`), so that the same measure, with the recipe's stated numbers,
    must say no. A verdict that still said yes would not be measuring the finding."""

    overrides: Mapping[str, Any]
    why: str

    def probe(self, seed: int = 0) -> Probe:
        """The control as a probe of the recipe, at `seed`."""
        return Probe(seed, self.overrides)


@dataclass(frozen=True)
class RunResult:
    """What the store holds of one ended run: its status and its metrics."""

    run_id: str
    status: str  # completed, diverged, stopped, failed, interrupted
    metrics: Metrics

    @property
    def diverged(self) -> bool:
        """Whether its loss or weights stopped being finite (the engine ends it there)."""
        if self.status == "diverged":
            return True
        return "loss" in self.metrics and bool(np.isinf(self.metrics["loss"]).any())


#: A recipe's ended runs, by arm key.
Results = Mapping[str, Sequence[RunResult]]

#: What a verdict says: the finding held (with the recipe's stated confidence where
#: noise could flip it), clearly did not, or neither, its numbers then saying how close.
Outcome = Literal["yes", "no", "inconclusive"]


def said(held: bool) -> Outcome:
    """The outcome of a test with no middle ground."""
    return "yes" if held else "no"


@dataclass(frozen=True)
class Verdict:
    """Whether the claim held, and the numbers it rests on.

    Attributes:
        reproduced: `yes`, `no` or `inconclusive` once every run has ended; None while
            some have not (the numbers are then those measured on the runs ended so far).
        numbers: The measured values the verdict rests on, by name; while runs train,
            only those measured already.
        sentence: The verdict in words, with its numbers; while runs train, what it
            waits for (a sentence of numbers not measured yet would read "nan").
        ended, total: How many of the recipe's runs have ended, of how many.
    """

    reproduced: Outcome | None
    numbers: Mapping[str, float]
    sentence: str
    ended: int = 0
    total: int = 0

    @property
    def final(self) -> bool:
        return self.reproduced is not None

    def text(self) -> str:
        """`reproduced: yes|no|inconclusive` (or `so far, k of n runs ended`) then the
        numbers, one a line: what the CLI prints last."""
        if self.reproduced is None:
            head = f"so far ({self.ended} of {self.total} runs ended)"
        else:
            head = f"reproduced: {self.reproduced}"
        lines = [head, self.sentence]
        lines += [f"  {name} = {number(value)}" for name, value in self.numbers.items()]
        return "\n".join(lines)


@dataclass(frozen=True)
class Judgement:
    """What a recipe's `judge` returns: the claim's test on the results at hand."""

    reproduced: Outcome
    numbers: dict[str, float] = field(default_factory=dict)
    sentence: str = ""


class Recipe:
    """A finding to reproduce; one subclass per module of `core.recipes`.

    Attributes:
        name: Its name on the command line, e.g. `edge_of_stability`.
        title: Its name on a card.
        paper: Where it was published.
        claim: The claim, in one sentence.
        measure: What is measured and compared, and the threshold of "reproduced".
        charts: The metric keys to look at, the key chart first.
        control: Its negative control: a setting under which the finding must vanish.
        runtime_s: About how long its runs take together, in seconds, on 2 CPU cores
            (measured; see each module).
    """

    name: ClassVar[str]
    title: ClassVar[str]
    paper: ClassVar[Paper]
    claim: ClassVar[str]
    measure: ClassVar[str]
    charts: ClassVar[tuple[str, ...]]
    control: ClassVar[Control]
    runtime_s: ClassVar[float]

    def arms(self) -> tuple[Arm, ...]:
        """The runs it needs."""
        raise NotImplementedError

    def reference_lines(self) -> dict[str, list[tuple[str, float]]]:
        """Horizontal lines to draw on its charts, by metric key: (label, value), e.g.
        sharpness's 2/η (none by default)."""
        return {}

    def tables(self, results: Results) -> dict[str, Table]:
        """Grids of its results to show as heatmaps, by title (none by default)."""
        return {}

    def judge(self, results: Results) -> Judgement:
        """The claim's test on `results` (every arm's ended runs; an arm may have fewer
        runs, or none, while the recipe trains: its numbers are then NaN)."""
        raise NotImplementedError

    def verdict(self, results: Results) -> Verdict:
        """`judge` on `results`, final when every run of every arm has ended."""
        total = sum(arm.repeats for arm in self.arms())
        ended = sum(len(results.get(arm.key, ())) for arm in self.arms())
        judged = self.judge(results)
        if ended >= total:
            return Verdict(judged.reproduced, judged.numbers, judged.sentence, ended, total)
        measured = {name: v for name, v in judged.numbers.items() if not math.isnan(v)}
        waiting = [arm.key for arm in self.arms() if len(results.get(arm.key, ())) < arm.repeats]
        sentence = f"The verdict waits for {total - ended} more run(s): {', '.join(waiting)}."
        return Verdict(None, measured, sentence, ended, total)


def quiet_run(**fields: Any) -> RunConfig:
    """A run of `fields`, every instrument off and no checkpoints unless they say
    otherwise: a recipe's runs measure only what it judges."""
    off = dict.fromkeys(INSTRUMENT_FIELDS, 0)
    return RunConfig.from_dict({"checkpoint_every": 0, **off, **fields})


def digits_mlp(**fields: Any) -> RunConfig:
    """A quiet run of the MLP on digits (bundled, 1,438 training examples): what most
    recipes train."""
    return quiet_run(**{"dataset": "digits", "model": "mlp", **fields})
