"""How every chart looks: its colours, dashes and number formats, one place for all."""

from __future__ import annotations

from core import readable

PALETTE = ("#f5a524", "#4cc9f0", "#f72585", "#80ed99", "#b388eb", "#ff8c42", "#90a4ae", "#ffd166")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
TOTAL_COLOUR = "#e0e0e0"  # a sum over layers, drawn among the layers' palette colours
# The `meta` of a trace that draws a reference (a radius, a threshold): always in range.
REFERENCE = "reference"

# d3-format: up to 6 significant digits on ticks and 4 on hover, trailing zeros trimmed,
# thousands grouped, and never an exponent ("~g" labelled a diverging run's ticks 5e+11);
# a log axis over whole decades labels them as powers of ten (`layout.log_ticks`).
TICK_FORMAT = ",~r"
HOVER_FORMAT = ",.4~r"
PERCENT_TICK_FORMAT = "~%"
PERCENT_HOVER_FORMAT = ".2~%"
STEP_HOVER_FORMAT = ","  # 12,345


def run_colour(index: int) -> str:
    """The colour of the `index`-th run of a chart that was given none of its own."""
    return PALETTE[index % len(PALETTE)]


def series_colour(colour: str, series: int) -> str:
    """The colour of the `series`-th series of a run drawn alone in `colour`: its own for
    the first, then the palette's next ones, so that one run's lines tell apart."""
    start = PALETTE.index(colour) if colour in PALETTE else -1
    return colour if series == 0 else PALETTE[(start + series) % len(PALETTE)]


class ColourBook:
    """A colour for each run, the same on every chart for as long as the book is kept
    (a dashboard session): a run seen for the first time takes the palette colour that
    the fewest runs seen so far have (the first such, in palette order)."""

    def __init__(self) -> None:
        self._colours: dict[str, str] = {}

    def colour(self, run_id: str) -> str:
        if run_id not in self._colours:
            taken = list(self._colours.values())
            self._colours[run_id] = min(PALETTE, key=taken.count)
        return self._colours[run_id]


def layer_style(index: int) -> tuple[str, str]:
    """(colour, dash) of the `index`-th layer of a chart of one run: past the palette, the
    colours come round again with another dash."""
    return PALETTE[index % len(PALETTE)], DASHES[index // len(PALETTE) % len(DASHES)]


def number(value: object) -> str:
    """A knob's value as people read it (`core.readable.number`); "off" for None, a knob
    that is off."""
    return "off" if value is None else readable.number(value)
