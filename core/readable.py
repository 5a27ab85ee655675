"""`number`: how every number reads where people see it (pages, captions, chart titles and
labels, the terminal's summaries), one format for all.

Four significant digits (the digits before the point all kept), trailing zeros dropped,
thousands grouped (12,345). From 10⁶ up and below 10⁻⁴, a power of ten (3.2 × 10⁻⁵): never Python's
`1e+02` or `1e-05`, nor Plotly's SI prefixes (`928.17μ`), which a room reads as a typo. No
value (None) and not a number (a loss that overflowed, an empty mean) read "–"; the
infinities "∞" and "−∞".
"""

from __future__ import annotations

import math
import numbers

NONE = "–"  # no value, or not a number
SIGNIFICANT = 4
_SMALLEST_PLAIN = 1e-4  # 0.0001 reads plainly; 0.00001 is easier as 1 × 10⁻⁵
_LARGEST_PLAIN = 1e6
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def number(value: object, significant: int = SIGNIFICANT) -> str:
    """`value` as people read it (see the module docstring), to `significant` digits (a
    p-value reads best to two); text that is not a number (a name, a choice) as it is,
    and True and False as "on" and "off"."""
    if value is None:
        return NONE
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    if not isinstance(value, numbers.Real):
        return str(value)
    x = float(value)
    if math.isnan(x):
        return NONE
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    if x == 0:
        return "0"
    rounded = f"{x:.{significant - 1}e}"  # 9.99996e-05 rounds to 1.000e-04
    mantissa, power = rounded.split("e")[0], int(rounded.split("e")[1])
    if _SMALLEST_PLAIN <= abs(float(rounded)) < _LARGEST_PLAIN:
        return _trimmed(f"{x:,.{max(0, significant - 1 - power)}f}")
    return f"{_trimmed(mantissa)} × 10{str(power).translate(_SUPERSCRIPT)}"


def _trimmed(text: str) -> str:
    """`text` without the zeros that end its decimals, nor a point left bare."""
    return text.rstrip("0").rstrip(".") if "." in text else text
