"""Knobs: declared settings (optimizer hyperparameters, run fields) and their validation.

A `Knob` says everything the rest of the lab needs to know about one setting: its type,
default, valid range, whether `None` turns it off, whether it can change while a run
trains, and one line of help. Optimizers validate their arguments against their knobs, runs
validate their configs against theirs, and the dashboard and the CLI build their inputs
from them, so a range is written down exactly once.

The knobs every optimizer has are declared with the stage of the step they control, in
`core.optimizers.stages`. This module is pure Python: it imports neither TensorFlow nor
Keras.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

KnobType = Literal["float", "int", "bool", "choice", "text", "rules"]
MAX_TEXT = 200
FLOAT32_TINY = 2.0**-126  # the smallest normal float32


class InvalidInput(ValueError):
    """Bad input, named field by field: a run config, a knob value, a study's settings, a
    command to a run that has ended.

    `errors` maps each bad field to what is wrong with it; the message lists them all.
    """

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors = dict(errors)
        super().__init__("; ".join(f"{name}: {why}" for name, why in self.errors.items()))


#: Its name from when only hyperparameters raised it; plugins and scripts may use it still.
InvalidHyperparameters = InvalidInput


# A number as people type it: digits, one point, an exponent; no `_` separators (Python's
# `float("1_0")` is 10), no spaces inside. Infinities and NaN read, for validation to refuse.
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|infinity|nan)", re.I)
_INTEGER = re.compile(r"[+-]?\d+")


def read_number(text: str, *, real: bool = False) -> int | float:
    """`text` as a number: an `int` when it is written as a whole number (unless `real`),
    else a `float` (infinite when too large for one). Raises `ValueError` for anything
    else."""
    text = text.strip()
    if _INTEGER.fullmatch(text) and not real:
        try:
            return int(text)
        except ValueError:  # more digits than Python converts: a float (inf) then
            return float(text)
    if _NUMBER.fullmatch(text):
        return float(text)
    raise ValueError(f"must be a number (got {text!r})")


@dataclass(frozen=True)
class Knob:
    """One hyperparameter of an optimizer.

    Attributes:
        name: The keyword argument, e.g. `"learning_rate"`.
        type: `"float"`, `"int"`, `"bool"`, `"choice"` (one of `choices`), `"text"` (a
            printable string), or `"rules"` (a list of `LayerRule`s).
        default: The value used when the argument is not given.
        help: One line for a form or a `--help` text.
        low, high: The valid range of a number (inclusive unless `low_open`/`high_open`).
        optional: `None` is allowed and turns the knob off (it then costs nothing).
        live: The value lives in a variable and can change while a run trains, at the
            next step and without retracing.
        log_scale: A hint for forms and sweeps: the knob spans orders of magnitude.
        choices: The valid values of a `"choice"` knob.
    """

    name: str
    type: KnobType
    default: Any
    help: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    optional: bool = False
    live: bool = False
    log_scale: bool = False
    choices: tuple[str, ...] = ()

    def with_default(self, default: Any) -> Knob:
        """This knob with another default (registry variants such as `adamw`)."""
        return Knob(**{**self.__dict__, "default": default})

    def range_text(self) -> str:
        """The valid range in interval notation, e.g. `(0, 10]`."""
        if self.low is None and self.high is None:
            return ""
        low = "-inf" if self.low is None else self._number(self.low)
        high = "inf" if self.high is None else self._number(self.high)
        left = "(" if self.low_open or self.low is None else "["
        right = ")" if self.high_open or self.high is None else "]"
        return f"{left}{low}, {high}{right}"

    def _number(self, value: float) -> str:
        return str(int(value)) if self.type == "int" else f"{value:g}"

    def from_text(self, text: str) -> Any:
        """`text` as typed (a flag's, a form's `KNOB=VALUE`) turned into what `validate`
        takes: a number when it reads as one, None for `none` (an optional knob), `true`
        or `false` for a bool, else the text itself, for `validate` to refuse naming the
        knob."""
        if self.optional and text.strip().lower() == "none":
            return None
        if self.type == "bool" and text.strip().lower() in ("true", "false"):
            return text.strip().lower() == "true"
        if self.type not in ("int", "float"):
            return text
        # A float knob's text is read as a float: as an int, `1` and 400 zeros would be a
        # number that no float holds (1e400 reads as inf, which validation refuses).
        try:
            return read_number(text, real=self.type == "float")
        except ValueError:
            return text

    def validate(self, value: Any) -> Any:
        """Returns `value` normalized to the knob's type, or raises `ValueError` saying why."""
        if value is None:
            if self.optional:
                return None
            raise ValueError("is required")
        if self.type == "rules":
            return parse_layer_rules(value)
        if self.type == "text":
            if not isinstance(value, str) or not 0 < len(value) <= MAX_TEXT:
                raise ValueError(f"must be text of 1 to {MAX_TEXT} characters (got {value!r})")
            if not value.isprintable():
                raise ValueError("must contain only printable characters")
            return value
        if self.type == "choice":
            if value not in self.choices:
                raise ValueError(f"must be one of {', '.join(self.choices)} (got {value!r})")
            return value
        if self.type == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"must be true or false (got {value!r})")
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"must be a number (got {value!r})")
        if self.type == "int":
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(f"must be a whole number (got {value!r})")
            value = int(value)
        else:
            try:
                value = float(value)
            except OverflowError:
                raise ValueError("must be a finite number (got a number too large)") from None
            if not math.isfinite(value):
                raise ValueError(f"must be a finite number (got {value!r})")
            if 0 < abs(value) < FLOAT32_TINY:
                # A live knob is a float32 variable, which would hold this as 0.
                raise ValueError(
                    f"must be 0 or at least {FLOAT32_TINY:.3g} in size (got {value!r})"
                )
        self._check_range(value)
        return value

    def _check_range(self, value: float) -> None:
        too_low = self.low is not None and (
            value < self.low or (self.low_open and value == self.low)
        )
        too_high = self.high is not None and (
            value > self.high or (self.high_open and value == self.high)
        )
        if too_low or too_high:
            raise ValueError(f"must be in {self.range_text()} (got {value!r})")


@dataclass(frozen=True)
class LayerRule:
    """A per-layer override chosen by a regular expression on the variable path.

    A variable's path is its layer path plus its name, e.g. `sequential/logits/kernel`;
    the first rule whose `pattern` is found in it (a search, as `re.search`) applies.
    Patterns are RE2 expressions (see `compile_pattern`).

    Attributes:
        pattern: The regular expression.
        lr_mult: Multiplies the step the optimizer proposes for matching variables.
        weight_decay: Decoupled weight decay for matching variables, replacing the
            optimizer-wide `weight_decay`; `None` keeps the optimizer-wide one.
    """

    pattern: str
    lr_mult: float = 1.0
    weight_decay: float | None = None

    @functools.cached_property
    def regex(self) -> Any:
        return compile_pattern(self.pattern)

    def to_dict(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "lr_mult": self.lr_mult, "weight_decay": self.weight_decay}


def compile_pattern(pattern: str) -> Any:
    """`pattern` compiled by RE2, whose matching takes time linear in the text whatever the
    pattern: Python's backtracking `re` can take hours on `(x|x|x)*y` against a long path,
    holding the interpreter lock all the while. RE2 has no backreferences or lookaround;
    such a pattern raises `ValueError` saying so."""
    import re2  # google-re2: Python's `re` interface on RE2

    options = re2.Options()
    options.log_errors = False  # the error is raised, with the reason
    try:
        return re2.compile(pattern, options=options)
    except re2.error as exc:
        reason = exc.args[0].decode() if isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(
            f"does not compile: {reason} (patterns are RE2 expressions: no backreferences "
            "or lookaround)"
        ) from None


LR_MULT = Knob("lr_mult", "float", 1.0, "Step multiplier.", low=0.0, high=100.0)
RULE_WEIGHT_DECAY = Knob("weight_decay", "float", None, "Decay.", low=0.0, high=10.0, optional=True)


def parse_layer_rules(value: Any) -> tuple[LayerRule, ...]:
    """Validates a list of rule mappings (or `LayerRule`s) into a tuple of `LayerRule`s.

    Errors name the offending entry and field, e.g. `layer_rules[1].pattern`.
    """
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ValueError(f"must be a list of rules (got {value!r})")
    rules, errors = [], {}
    for i, item in enumerate(value):
        if isinstance(item, LayerRule):
            rules.append(item)
            continue
        where = f"[{i}]"
        if not isinstance(item, Mapping):
            errors[where] = f"must be a mapping with a 'pattern' (got {item!r})"
            continue
        unknown = set(item) - {"pattern", "lr_mult", "weight_decay"}
        if unknown:
            errors[where] = f"unknown field(s) {sorted(unknown)}"
            continue
        pattern = item.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            errors[f"{where}.pattern"] = f"must be a non-empty regular expression (got {pattern!r})"
            continue
        try:
            compile_pattern(pattern)
        except ValueError as exc:
            errors[f"{where}.pattern"] = str(exc)
            continue
        try:
            lr_mult = LR_MULT.validate(item.get("lr_mult", 1.0))
        except ValueError as exc:
            errors[f"{where}.lr_mult"] = str(exc)
            continue
        try:
            weight_decay = RULE_WEIGHT_DECAY.validate(item.get("weight_decay"))
        except ValueError as exc:
            errors[f"{where}.weight_decay"] = str(exc)
            continue
        rules.append(LayerRule(pattern, lr_mult, weight_decay))
    if errors:
        raise ValueError("; ".join(f"{where}: {why}" for where, why in errors.items()))
    return tuple(rules)


def live_change(knobs: Iterable[Knob], name: str, value: Any, *, was_on: bool) -> Any:
    """`value` validated as a mid-run change of knob `name`; raises `ValueError` saying why
    it cannot be: the knob is not live, it was off when training started (an off knob is
    not in the traced step), or the value is invalid or would turn it off."""
    knobs = tuple(knobs)
    knob = next((k for k in knobs if k.name == name), None)
    if knob is None or not knob.live:
        live = ", ".join(k.name for k in knobs if k.live)
        raise ValueError(f"is not a live knob (live: {live})")
    if not was_on:
        raise ValueError("was off when training started; start with a value to change it")
    value = knob.validate(value)
    if value is None:
        raise ValueError("cannot be turned off while training")
    return value


def validate(knobs: Iterable[Knob], values: Mapping[str, Any], *, owner: str) -> dict[str, Any]:
    """Validates `values` against `knobs`, filling defaults.

    Returns every knob's value. Raises `InvalidInput` listing every bad or
    unknown field at once; `owner` names the optimizer in the unknown-field message.
    """
    by_name = {knob.name: knob for knob in knobs}
    errors = {
        name: f"unknown hyperparameter for {owner} (known: {', '.join(by_name)})"
        for name in values
        if name not in by_name
    }
    result = {}
    for name, knob in by_name.items():
        try:
            result[name] = knob.validate(values.get(name, knob.default))
        except ValueError as exc:
            errors[name] = str(exc)
    if errors:
        raise InvalidInput(errors)
    return result
