"""How every chart looks: its colours, dashes and number formats, one place for all."""

from __future__ import annotations

from core import readable

PALETTE = ("#f5a524", "#4cc9f0", "#f72585", "#80ed99", "#b388eb", "#ff8c42", "#90a4ae", "#ffd166")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
# A run's layers: shades of its colour from this much white to this much black (on the
# dark page, darker than that fades into the background), in dashes that cycle.
LIGHTEST, DARKEST = 0.55, 0.35
LAYER_DASHES = ("solid", "dash", "dot")
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


def layer_style(colour: str, index: int, count: int) -> tuple[str, str]:
    """(colour, dash) of the `index`-th of a run's `count` layers, the run drawn in
    `colour`: a shade of it, from light (the first layer) to dark (the last), so that the
    run keeps its colour and the shade says where in the network a layer sits; the dash
    cycles, so that neighbouring layers differ by more than a shade."""
    place = index / (count - 1) if count > 1 else 0.5  # 0 first, 1 last; the middle: 0.5
    amount = LIGHTEST * (1 - 2 * place) if place < 0.5 else -DARKEST * (2 * place - 1)
    return shade(colour, amount), LAYER_DASHES[index % len(LAYER_DASHES)]


def shade(colour: str, amount: float) -> str:
    """`colour` (`#rrggbb`) mixed with white by `amount` when it is above 0, with black by
    −`amount` when below: a sequential palette of one hue."""
    red, green, blue = (int(colour[k : k + 2], 16) for k in (1, 3, 5))
    towards = 255 if amount > 0 else 0
    mixed = (round(c + (towards - c) * abs(amount)) for c in (red, green, blue))
    return "#{:02x}{:02x}{:02x}".format(*mixed)


def number(value: object) -> str:
    """A knob's value as people read it (`core.readable.number`); "off" for None, a knob
    that is off."""
    return "off" if value is None else readable.number(value)
