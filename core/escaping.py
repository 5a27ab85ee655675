"""Text from users and from the store, shown as typed: one escaping function per markup.

A run's name, a tag, a layer's name, an error message, a plugin's summary: anything the
lab did not write itself may hold markup. Streamlit renders Markdown (links, images,
colour directives, icons, maths); Plotly renders a subset of HTML in legends, ticks and
hover text, and reads `%{...}` in hover templates as a variable.
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
