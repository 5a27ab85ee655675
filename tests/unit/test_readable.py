"""`core.readable.number`: one way to write a number for people, on every page and chart."""

from __future__ import annotations

import numpy as np
import pytest

from core.readable import number


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "–"),
        (float("nan"), "–"),
        (float("inf"), "∞"),
        (-float("inf"), "−∞"),
        (True, "on"),
        (0.0, "0"),
        (12345, "12,345"),
        (np.int64(7), "7"),
        (100.0, "100"),  # not 1e+02
        (51.8, "51.8"),
        (2 / 3, "0.6667"),
        (1234.5678, "1,235"),
        (0.30000000000000004, "0.3"),
        (np.float32(0.1), "0.1"),
        (928.17e-6, "0.0009282"),  # not 928.17μ
        (1e-4, "0.0001"),
        (9.9996e-5, "0.0001"),  # rounds up into the plain range
        (3.2e-5, "3.2 × 10⁻⁵"),  # not 3.2e-05
        (-2e-7, "-2 × 10⁻⁷"),
        (999999.6, "1 × 10⁶"),
        (1.5e12, "1.5 × 10¹²"),
        ("sgd", "sgd"),
    ],
)
def test_a_number_reads_as_people_write_it(value: object, shown: str) -> None:
    assert number(value) == shown


@pytest.mark.parametrize(
    ("value", "shown"),
    [(0.0021645, "0.0022"), (4.9126e-15, "4.9 × 10⁻¹⁵"), (0.05, "0.05"), (1.0, "1")],
)
def test_a_p_value_reads_to_two_digits(value: float, shown: str) -> None:
    assert number(value, significant=2) == shown
