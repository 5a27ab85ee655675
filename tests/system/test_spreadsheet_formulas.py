"""Spreadsheet formulas in the lab's CSVs (issue 51, item 3): a run named or tagged like a
formula, or a metric key planted in a store, is text in every CSV the lab writes or
offers (`optlab export --csv`, Home's table download), never a formula; the lab's own
numbers, a negative one included, stay numbers. Home's table offers no download of its
own toolbar (Streamlit's writes the cells as they are): its "Download as CSV" button
does, in a real browser, for a viewer too."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from core.escaping import FORMULA_STARTS
from core.store import Store
from core.store.metrics import Block
from tests import app_server
from tests.apptest import written_run
from tests.browser import NEEDS_CHROMIUM, chromium, settle
from tests.cli import run_main
from tests.waiting import scaled

NAME = '=HYPERLINK("http://x","y")'
TAGS = ["=1+2", "@SUM(1+1)"]
# Keys anyone who writes the store may plant: each begins with a formula character.
KEYS = ["=cmd|' /C calc'!A0", "+1+2", "-2+3", "@SUM(1+1)", "\t=1+2", "\r=1+2"]
VALUE = -0.5  # a real metric value: a number, which no escape may touch


def formulas(table: list[list[str]]) -> list[str]:
    """The cells of `table` that a spreadsheet would run: those that begin with a formula
    character, numbers (-0.5) aside."""
    return [
        cell
        for row in table
        for cell in row
        if cell.startswith(FORMULA_STARTS) and not number(cell)
    ]


def number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def parsed(path: Path) -> list[list[str]]:
    """The cells of the CSV file at `path` (read as written: a cell may hold a `\r`)."""
    with path.open(newline="", encoding="utf-8") as file:
        return list(csv.reader(file))


def planted(store_path: Path) -> str:
    """A run named and tagged like formulas, its best accuracy and every planted key's
    value `VALUE`."""
    with Store(store_path) as store:
        run_id = written_run(store, "r1", NAME, final={"best_val_accuracy": VALUE})
        store.set_tags(run_id, TAGS)
        columns = np.full((len(KEYS), 1), VALUE)
        store.append_metrics(run_id, Block(tuple(KEYS), np.array([40]), columns))
    return run_id


def test_optlab_export_csv_keeps_a_planted_key_from_being_a_formula(tmp_path) -> None:
    store = tmp_path / "lab.sqlite"
    run_id = planted(store)
    code, _, err = run_main("export", run_id, "--store", store, "--csv", tmp_path / "run.csv")
    assert code == 0, err
    header, *rows = parsed(tmp_path / "run.csv")
    assert formulas([header]) == []
    assert {f"'{key}" for key in KEYS} <= set(header)  # each key shown, as text
    steps = {int(row[0]): dict(zip(header, row, strict=True)) for row in rows}
    assert [steps[40][f"'{key}"] for key in KEYS] == [str(VALUE)] * len(KEYS)  # numbers stay
    assert steps[30]["val_loss"] == "0.5"


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[str, str]]:
    """The app on a store with the planted run: (its URL, the run's id)."""
    folder = tmp_path_factory.mktemp("formulas")
    store = folder / "lab.sqlite"
    run_id = planted(store)
    process, port = app_server.start(store, folder / "streamlit.log")
    yield f"http://127.0.0.1:{port}", run_id
    app_server.stop(process, store)


@pytest.mark.slow
@NEEDS_CHROMIUM
def test_homes_table_downloads_no_formula_and_offers_no_download_of_its_own(
    server, tmp_path
) -> None:
    url, run_id = server
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
        page.goto(url)
        settle(page)
        table = page.locator("[data-testid=stDataFrame]")
        table.hover()  # shows the table's toolbar
        toolbar = page.locator("[data-testid=stElementToolbar]")
        toolbar.get_by_role("button", name="Search").wait_for(timeout=scaled(30_000))
        assert toolbar.get_by_role("button", name="Download as CSV").count() == 0

        with page.expect_download(timeout=scaled(60_000)) as download:
            page.locator("[data-testid=stDownloadButton] button").click()
        saved = tmp_path / download.value.suggested_filename
        download.value.save_as(saved)
    header, row = parsed(saved)
    assert formulas([header, row]) == []
    shown = dict(zip(header, row, strict=True))
    assert (shown["id"], shown["name"]) == (run_id, f"'{NAME}")
    assert shown["tags"] == "'" + ", ".join(TAGS)
    assert shown["best val acc"] == str(VALUE)
