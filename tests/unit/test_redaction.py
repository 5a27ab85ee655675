"""Secrets out of messages (`core.redaction.redacted`): every secret a database URL can
carry, in a URL that a message quotes, and those of the URLs a message is about wherever
the message quotes them (libpq's errors do)."""

from __future__ import annotations

import pytest

from core.redaction import redacted
from core.store import shown

# (text, as messages show it)
QUOTED = [
    ("postgresql://lab:hunter2@db:5432/lab", "postgresql://lab:***@db:5432/lab"),
    ("postgres://lab:hunter2@db/lab", "postgres://lab:***@db/lab"),
    ("postgresql+psycopg://lab:hunter2@db/lab", "postgresql+psycopg://lab:***@db/lab"),
    ("mysql+pymysql://lab:hunter2@db/lab", "mysql+pymysql://lab:***@db/lab"),
    # An unencoded `@` in a password: the user information ends at the last one.
    ("open 'postgresql://lab:p@ss@db/lab': no", "open 'postgresql://lab:***@db/lab': no"),
    (
        "postgresql://lab@db/lab?sslmode=require&password=hunter2",
        "postgresql://lab@db/lab?sslmode=require&password=***",
    ),
    # Any case, and a percent-encoded name, which libpq decodes.
    ("postgresql://lab@db/lab?PassWord=hunter2", "postgresql://lab@db/lab?PassWord=***"),
    ("postgresql://lab@db/lab?pass%77ord=hunter2", "postgresql://lab@db/lab?pass%77ord=***"),
    (
        "postgresql://lab@db/lab?sslpassword=hunter2&passfile=/home/lab/.pgpass",
        "postgresql://lab@db/lab?sslpassword=***&passfile=***",
    ),
    # libpq's key=value form, a quoted value with a blank in it.
    ("host=db password = 'hunter 2' dbname=lab", "host=db password = '***' dbname=lab"),
    # Nothing secret: as it was.
    ("postgresql://lab@db/lab?options=-csearch_path%3Dteam", None),
    ("cannot write runs/optlab.sqlite: disk full", None),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), QUOTED)
def test_a_message_shows_no_secret_of_a_url_it_quotes(text: str, expected: str | None) -> None:
    assert redacted(text) == (expected or text)
    assert redacted(redacted(text)) == redacted(text)  # as often as a message passes by


def test_the_secrets_of_the_url_a_message_is_about_are_masked_wherever_they_stand() -> None:
    """libpq quotes the part of a URL it cannot parse, a password included: a `%` not
    encoded, a blank; and a secret's percent-decoded form is one too."""
    url = "postgresql://lab:50%off now@db/lab?sslpassword=key%20one&sslmode=require"
    assert redacted('invalid percent-encoded token: "50%off now"', url) == (
        'invalid percent-encoded token: "***"'
    )
    assert redacted("could not decrypt with key one", url) == "could not decrypt with ***"
    assert shown(url) == "postgresql://lab:***@db/lab?sslpassword=***&sslmode=require"


def test_a_short_password_masks_no_part_of_a_word() -> None:
    url = "postgresql://lab:ab@db/lab"
    assert redacted("tables: abc, lab_ab; ab", url) == "tables: abc, lab_***; ***"
    assert redacted("runs/ab.sqlite is a path", "runs/ab.sqlite") == "runs/ab.sqlite is a path"
