"""Fast paths for moving many rows: COPY on Postgres, a paused garbage collector.

An import writes millions of small rows. On Postgres, ``COPY`` moves them an order of
magnitude faster than INSERT statements; ids for rows that need them come from the
table's sequence first. SQLite's executemany is already fast, so it keeps plain INSERTs.
"""

import gc
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import JSON, Table, func, insert, select, text
from sqlalchemy.orm import Session


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector: bulk work allocates many objects and frees them
    by reference counting, but would trigger full collections over the whole heap.

    The collector is the whole process's: only a process that does nothing else meanwhile
    pauses it (the command line's import and export). The web app never does, as its
    uploads run in a thread beside the requests, which would all go without collections."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def is_postgres(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def insert_rows(session: Session, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert ``rows`` (dicts of column values) into ``table``."""
    if not rows:
        return
    if is_postgres(session):
        _copy(session, table, rows)
    else:
        session.execute(insert(table), rows)


def insert_rows_returning_ids(
    session: Session, table: Table, rows: list[dict[str, Any]]
) -> list[int]:
    """Insert ``rows`` and return their new ids, in order."""
    if not rows:
        return []
    if is_postgres(session):
        ids = list(session.execute(_NEXT_IDS, {"table": table.name, "n": len(rows)}).scalars())
        _copy(session, table, _with_ids(rows, ids))
        return ids
    # The transaction holds SQLite's write lock from its start (app/core/db.py), so no one else
    # can take these ids; numbering here spares RETURNING's row-by-row inserts.
    start = session.scalar(select(func.max(table.c.id))) or 0
    ids = list(range(start + 1, start + 1 + len(rows)))
    session.execute(insert(table), _with_ids(rows, ids))
    return ids


_NEXT_IDS = text("SELECT nextval(pg_get_serial_sequence(:table, 'id')) FROM generate_series(1, :n)")


def _with_ids(rows: list[dict[str, Any]], ids: list[int]) -> list[dict[str, Any]]:
    return [{**row, "id": row_id} for row, row_id in zip(rows, ids, strict=True)]


ANALYZE_AFTER_ROWS = 5000
"""Loads smaller than this leave statistics to autovacuum."""


def analyze(session: Session, tables: Sequence[Table], rows_loaded: int) -> None:
    """Refresh the planner's statistics after a bulk load (Postgres); a no-op elsewhere.

    Without it, an export right after a large import plans its joins on empty-table
    estimates and runs about half as fast.
    """
    if is_postgres(session) and rows_loaded >= ANALYZE_AFTER_ROWS:
        for table in tables:
            session.execute(text(f'ANALYZE "{table.name}"'))


def _copy(session: Session, table: Table, rows: list[dict[str, Any]]) -> None:
    columns = [column for column in table.columns if column.name in rows[0] or _default(column)]
    json_columns = {column.name for column in columns if isinstance(column.type, JSON)}
    defaults = {column.name: _default(column) for column in columns if column.name not in rows[0]}
    column_names = [column.name for column in columns]
    names = ", ".join(f'"{name}"' for name in column_names)
    raw = session.connection().connection.driver_connection
    assert raw is not None
    with raw.cursor() as cursor, cursor.copy(f'COPY "{table.name}" ({names}) FROM STDIN') as copy:
        for row in rows:
            copy.write_row(
                [
                    _copy_value(
                        row[name] if name in row else defaults[name](), name in json_columns
                    )
                    for name in (column.name for column in columns)
                ]
            )


def _default(column: Any) -> Any:
    """A zero-argument function giving the column's Python-side default, if it has one."""
    default = column.default
    if default is None:
        return None
    if default.is_callable:
        return lambda: default.arg(None)
    return lambda: default.arg


def _copy_value(value: Any, is_json: bool) -> Any:
    if is_json and value is not None:
        return json.dumps(value)
    return value
