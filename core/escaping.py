"""Text from users and from the store, shown as typed: one escaping function per markup.

A run's name, a tag, a layer's name, an error message, a plugin's summary: anything the
lab did not write itself may hold markup. Streamlit renders Markdown (links, images,
colour directives, icons, maths); Plotly renders a subset of HTML in legends, ticks and
hover text, and reads `%{...}` in hover templates as a variable; a spreadsheet runs a
CSV cell that begins with `=` as a formula.
"""

from __future__ import annotations

import html
import re

_MARKDOWN_SPECIALS = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|:$~%&=\"'^])")


def escape_markdown(text: str) -> str:
    """`text` for Streamlit's Markdown: every punctuation mark that could start a link, an
    image, emphasis, a colour directive, an icon or maths is backslash-escaped."""
    return _MARKDOWN_SPECIALS.sub(r"\\\1", str(text))


def escape_html(text: str) -> str:
    """`text` for Plotly's HTML subset (legends, ticks, titles, hover text): `<`, `>` and
    `&` escaped, and `%{` broken with a zero-width space so that no hover template reads
    it as a variable."""
    return html.escape(str(text), quote=False).replace("%{", "%\u200b{")


#: What a spreadsheet reads as the start of a formula (or, a tab or carriage return, what it
#: strips before looking): OWASP's list for CSV injection.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(cell: object) -> object:
    """`cell` for a CSV that a spreadsheet opens: text that begins with a formula
    character (`FORMULA_STARTS`) gets a leading `'`, which makes Excel, LibreOffice and
    Google Sheets show it as text rather than run it (`=HYPERLINK(...)` would otherwise
    be a link, and `=cmd|...` a command). Numbers, `None` and every other value pass
    unchanged: the lab's own -0.5 stays a number. Python's `csv` module quotes a cell
    that holds a separator, a quote or a line break, so that no cell's text can begin a
    cell of its own (OWASP's other rule)."""
    if isinstance(cell, str) and cell.startswith(FORMULA_STARTS):
        return "'" + cell
    return cell
