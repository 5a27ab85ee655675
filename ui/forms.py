"""Widgets built from `Knob`s, and the parsing of what was typed back into values.

Numbers are typed as text, so that any value (1e-3, an empty field for "off", a typo) can
be entered and then refused by the same validation the engine uses, with the reason shown
under the field, rather than silently clamped by a widget. Every widget keeps its value
for the session (`state.KEPT`), and every table its rows (`table`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from core.escaping import escape_markdown
from core.knobs import Knob, read_number
from ui import state

RULE_COLUMNS = ("pattern", "lr_mult", "weight_decay")
#: Completes a row an edit touched: (the row edited, the cells the edit set) → the row.
Fill = Callable[[dict[str, Any], Mapping[str, Any]], dict[str, Any]]


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


def seed(knob: Knob, key: str) -> None:
    """Seeds the widget of `key` with the knob's default, unless it holds a value already
    (a table, its rows: see `table`)."""
    if knob.type == "rules":
        st.session_state.setdefault(f"{key}:data", initial(knob, knob.default))
    else:
        st.session_state.setdefault(key, initial(knob, knob.default))


def field(knob: Knob, key: str, errors: Mapping[str, str]) -> Any:
    """A form's field: the knob's widget, seeded with its default, and why the value last
    submitted was refused, if it was, right under it. Train's and Sweep's forms are built
    of these, so that a run field reads the same, and takes the same values, in both."""
    seed(knob, key)
    value = widget(knob, key)
    show_error(errors, knob.name)
    return value


def widget(knob: Knob, key: str, *, label: str | None = None) -> Any:
    """The knob's widget, its current value read from `st.session_state[key]`."""
    label = label or knob.name
    help_text = knob_help(knob)
    if knob.type == "bool":
        return st.toggle(label, key=key, help=help_text, persist_state=state.KEPT)
    if knob.type == "choice":
        return st.selectbox(label, knob.choices, key=key, help=help_text, persist_state=state.KEPT)
    if knob.type == "rules":
        return table(
            key,
            RULE_COLUMNS,
            {
                "pattern": st.column_config.TextColumn("pattern (regex on variable path)"),
                "lr_mult": st.column_config.NumberColumn("step multiplier", default=1.0),
                "weight_decay": st.column_config.NumberColumn("weight decay (empty: global)"),
            },
        )
    return st.text_input(
        label,
        key=key,
        help=help_text,
        placeholder="off" if knob.optional else "",
        persist_state=state.KEPT,
    )


def table(
    key: str, columns: Sequence[str], config: Mapping[str, Any], fill: Fill | None = None
) -> pd.DataFrame:
    """An editable table of the rows kept in `st.session_state[f"{key}:data"]`; returns
    them as edited.

    Each edit is folded into those rows at once (`fill` completing each row it touched),
    and the editor starts again from them: a data editor's own state is its edits, which
    Streamlit drops with the widget when a page does not draw it, while a key of no
    widget's is kept for the session.
    """
    frame = pd.DataFrame(st.session_state.get(f"{key}:data", []), columns=list(columns))
    return st.data_editor(
        frame,
        key=key,
        num_rows="dynamic",
        hide_index=True,
        width="stretch",
        column_config=dict(config),
        on_change=fold,
        args=(key, fill),
    )


def fold(key: str, fill: Fill | None = None) -> None:
    """A table's callback: its edits folded into its rows; without its edits, the editor
    (whose identity is its data, rows changed) starts again from the new rows."""
    st.session_state[f"{key}:data"] = value_of_table(key, fill)
    st.session_state.pop(key, None)


def value_of_table(key: str, fill: Fill | None = None) -> list[dict[str, Any]]:
    """The rows of `table(key)` as edited, usable before it is drawn: its rows, with any
    edits not folded in yet (a test's, set in session state) applied."""
    return edited_rows(st.session_state.get(f"{key}:data", []), st.session_state.get(key), fill)


def edited_rows(
    rows: Sequence[Mapping[str, Any]],
    edits: Mapping[str, Any] | None,
    fill: Fill | None = None,
) -> list[dict[str, Any]]:
    """`rows` with a data editor's `edits` (its session state: edited, added and deleted
    rows, by position in `rows`) applied; `fill(row, cells set)` completes each row an
    edit set cells of."""
    edits = edits or {}
    result = [dict(row) for row in rows]
    touched: list[tuple[int, Mapping[str, Any]]] = []
    for index, changes in edits.get("edited_rows", {}).items():
        if int(index) < len(result):  # edits of rows since replaced are dropped
            result[int(index)].update(changes)
            touched.append((int(index), changes))
    for added in edits.get("added_rows", []):
        result.append(dict(added))
        touched.append((len(result) - 1, added))
    if fill is not None:
        for index, changes in touched:
            result[index] = fill(result[index], changes)
    deleted = {int(i) for i in edits.get("deleted_rows", [])}
    return [row for i, row in enumerate(result) if i not in deleted]


def value(knob: Knob, key: str) -> Any:
    """What the widget of `key` holds now, usable in callbacks (before the widget renders).

    A data editor keeps only its edits in session state; they are applied to its rows.
    """
    return value_of_table(key) if knob.type == "rules" else st.session_state[key]


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


def parsed(
    knobs: Iterable[Knob], key: Callable[[str], str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """What the widgets of `knobs` hold (knob `name`'s at `key(name)`), parsed: the values
    that parse, by name, and why each other does not, by name."""
    values: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for knob in knobs:
        try:
            values[knob.name] = parse(knob, value(knob, key(knob.name)))
        except ValueError as exc:
            errors[knob.name] = str(exc)
    return values, errors


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


def show_error(errors: Mapping[str, str], name: str) -> None:
    """The validation error of field `name`, if any, right under its widget."""
    if name in errors:
        error(name, errors[name])


def error(name: str, reason: str) -> None:
    """Why field `name` was refused; the reason quotes what was typed, shown as typed."""
    st.error(f"**{escape_markdown(name)}**: {escape_markdown(reason)}", icon=":material/warning:")
