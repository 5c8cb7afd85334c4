"""Small helpers for Core statements that several parts of the app share."""

from collections.abc import Callable
from typing import Any, cast

from sqlalchemy import CursorResult, Result, Row, Table
from sqlalchemy.dialects import postgresql, sqlite

AnyRow = Row[*tuple[Any, ...]]
"""A result row of any columns."""

INSERTS: dict[str, Callable[[Table], postgresql.Insert | sqlite.Insert]] = {
    "postgresql": postgresql.insert,
    "sqlite": sqlite.insert,
}
"""Each database's INSERT, for ON CONFLICT DO NOTHING: statements that meet a concurrent
request's row (a unique key taken meanwhile) insert nothing, instead of failing the
transaction. Keyed by dialect name, for ``INSERTS[connection.dialect.name]``."""


def rows_changed(result: Result[Any]) -> int:
    """How many rows an UPDATE or DELETE touched (Session.execute types it loosely)."""
    return cast(CursorResult[Any], result).rowcount
