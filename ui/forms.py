"""Widgets built from `Knob`s, and the parsing of what was typed back into values.

Numbers are typed as text, so that any value (1e-3, an empty field for "off", a typo) can
be entered and then refused by the same validation the engine uses, with the reason shown
under the field, rather than silently clamped by a widget.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import streamlit as st

from core.escaping import escape_markdown
from core.knobs import Knob, read_number

RULE_COLUMNS = ("pattern", "lr_mult", "weight_decay")


def initial(knob: Knob, value: Any) -> Any:
    """A value as its widget holds it: text for numbers (empty for off), the value else."""
    if knob.type in {"float", "int"}:
        return "" if value is None else f"{value:g}" if isinstance(value, float) else str(value)
    if knob.type == "text":
        return value or ""
    if knob.type == "rules":
        return [dict(rule) for rule in value or ()]
    return value


def knob_help(knob: Knob) -> str:
    """The knob's help, with its valid range, and what empty and live mean for it."""
    text = escape_markdown(knob.help)  # a plugin's, as the store holds it
    if knob.range_text():
        text += f" Valid: {knob.range_text()}."
    if knob.optional:
        text += " Empty: off."
    if knob.live:
        text += " Can change while the run trains."
    return text


def widget(knob: Knob, key: str, *, label: str | None = None) -> Any:
    """The knob's widget, its current value read from `st.session_state[key]`."""
    label = label or knob.name
    help_text = knob_help(knob)
    if knob.type == "bool":
        return st.toggle(label, key=key, help=help_text)
    if knob.type == "choice":
        return st.selectbox(label, knob.choices, key=key, help=help_text)
    if knob.type == "rules":
        rows = st.session_state.get(f"{key}:data", [])
        frame = pd.DataFrame(rows, columns=list(RULE_COLUMNS))
        return st.data_editor(
            frame,
            key=key,
            num_rows="dynamic",
            hide_index=True,
            width="stretch",
            column_config={
                "pattern": st.column_config.TextColumn("pattern (regex on variable path)"),
                "lr_mult": st.column_config.NumberColumn("step multiplier", default=1.0),
                "weight_decay": st.column_config.NumberColumn("weight decay (empty: global)"),
            },
        )
    return st.text_input(label, key=key, help=help_text, placeholder="off" if knob.optional else "")


def stepper(knob: Knob, key: str, *, label: str | None = None) -> int | None:
    """A whole-number knob as a number field with − and + (empty: off, for an optional
    one), bounded by the knob's range; its value read from `st.session_state[key]`."""
    low = None if knob.low is None else int(knob.low)
    high = None if knob.high is None else int(knob.high)
    return st.number_input(
        label or knob.name,
        min_value=low,
        max_value=high,
        value=None if knob.optional else "min",
        step=1,
        key=key,
        help=knob_help(knob),
        placeholder="off" if knob.optional else None,
    )


def value(knob: Knob, key: str) -> Any:
    """What the widget of `key` holds now, usable in callbacks (before the widget renders).

    A data editor keeps only its edits in session state; they are applied to its rows.
    """
    if knob.type != "rules":
        return st.session_state[key]
    rows = [dict(row) for row in st.session_state.get(f"{key}:data", [])]
    edits = st.session_state.get(key) or {}
    for index, changes in edits.get("edited_rows", {}).items():
        rows[int(index)].update(changes)
    rows += [dict(row) for row in edits.get("added_rows", [])]
    deleted = {int(i) for i in edits.get("deleted_rows", [])}
    return [row for i, row in enumerate(rows) if i not in deleted]


def parse(knob: Knob, raw: Any) -> Any:
    """What the widget holds, as the value to validate; raises `ValueError` saying why."""
    if knob.type in {"float", "int"}:
        if raw is None:  # an empty number field
            return None
        text = str(raw).strip()
        if text == "":
            return None
        number = read_number(text, real=knob.type == "float")
        if knob.type == "int" and isinstance(number, float) and number.is_integer():
            return int(number)
        return number
    if knob.type == "text":
        return str(raw).strip() or None
    if knob.type == "rules":
        return _rules(raw)
    return raw


def _rules(frame: Any) -> list[dict[str, Any]]:
    rows = frame.to_dict("records") if isinstance(frame, pd.DataFrame) else list(frame or [])
    rules = []
    for row in rows:
        pattern = row.get("pattern")
        if pattern is None or (isinstance(pattern, float) and math.isnan(pattern)):
            continue  # an empty row the editor added
        rule = {"pattern": pattern, "lr_mult": _number(row.get("lr_mult"), 1.0)}
        weight_decay = _number(row.get("weight_decay"), None)
        if weight_decay is not None:
            rule["weight_decay"] = weight_decay
        rules.append(rule)
    return rules


def _number(value: Any, default: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return default
    return value


def show_error(errors: dict[str, str], name: str) -> None:
    """The validation error of field `name`, if any, right under its widget."""
    if name in errors:
        error(name, errors[name])


def error(name: str, reason: str) -> None:
    """Why field `name` was refused; the reason quotes what was typed, shown as typed."""
    st.error(f"**{escape_markdown(name)}**: {escape_markdown(reason)}", icon=":material/warning:")
