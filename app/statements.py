"""Running the labeling requests' statements fast: built once, sent through the driver.

The labeling requests run about ten small statements a task. SQLAlchemy's execution layer
(parameter and result processing, execution contexts) costs about as much CPU as the driver
itself there, so ``run`` compiles a Core statement once and, on Postgres, hands the SQL to
psycopg directly, with the statement's own constants written in so that Postgres can plan
it once for every call; ``insert_values`` writes a few rows in one statement. Both behave the
same on SQLite, through SQLAlchemy.
"""

import functools
import json
from collections import namedtuple
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from sqlalchemy import JSON, Boolean, Connection, CursorResult, Executable, Result, Row, Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import CompileError, NoResultFound
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement
from sqlalchemy.types import TypeEngine

AnyRow = Row[*tuple[Any, ...]]
"""A result row of any columns."""

INSERTS: dict[str, Callable[[Table], postgresql.Insert | sqlite.Insert]] = {
    "postgresql": postgresql.insert,
    "sqlite": sqlite.insert,
}
"""Each database's INSERT, for ON CONFLICT DO NOTHING: statements that meet a concurrent
request's row (a unique key taken meanwhile) insert nothing, instead of failing the
transaction. Keyed by dialect name, for ``INSERTS[connection.dialect.name]``."""

_PLACEHOLDERS = {"qmark": "?", "format": "%s", "pyformat": "%s"}


def insert_values(connection: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert ``rows`` (dicts with the same keys) in one multi-row INSERT, through the driver.

    For the few rows a labeling request writes at once: SQLAlchemy's executemany costs about
    0.4 ms more per call than this one statement. JSON columns are encoded here, as the
    driver sees only plain values.
    """
    if not rows:
        return
    names = tuple(rows[0])
    head, one_row, is_json = _insert_parts(table, names, connection.dialect.paramstyle)
    values = tuple(
        json.dumps(value) if json_column and value is not None else value
        for row in rows
        for value, json_column in zip((row[name] for name in names), is_json, strict=True)
    )
    driver_connection = connection.connection.driver_connection
    assert driver_connection is not None
    driver_connection.cursor().execute(head + ", ".join([one_row] * len(rows)), values)


@functools.cache
def _insert_parts(
    table: Table, names: tuple[str, ...], paramstyle: str
) -> tuple[str, str, tuple[bool, ...]]:
    """The INSERT's head, one row's placeholders, and which columns hold JSON."""
    placeholder = _PLACEHOLDERS[paramstyle]
    head = f"INSERT INTO {table.name} ({', '.join(names)}) VALUES "
    one_row = "(" + ", ".join([placeholder] * len(names)) + ")"
    # SQL NULL, not the JSON literal null, stays None (as NullableJSON stores it).
    return head, one_row, tuple(isinstance(table.c[name].type, JSON) for name in names)


class StatementResult(Protocol):
    """What ``run`` gives back: rows with attribute access by column name."""

    @property
    def rowcount(self) -> int: ...

    def first(self) -> Any: ...

    def one(self) -> Any: ...

    def scalar(self) -> Any: ...

    def all(self) -> Sequence[Any]: ...


def run(
    connection: Connection, statement: Executable, params: dict[str, Any] | None = None
) -> StatementResult:
    """Execute a Core statement built once at import time; on Postgres, through the driver.

    The labeling requests run about ten statements a task. SQLAlchemy's execution layer
    (parameter and result processing, execution contexts) costs about as much CPU as the
    driver itself there; compiled once, the same SQL goes to psycopg directly. Statements
    that need SQLAlchemy's processing (typed binds, Python-side defaults, expanding IN)
    take the usual path, as does every statement on SQLite.

    ``statement`` must be built once (a module constant): compiled statements are kept by
    the statement object, so one built per call would be compiled each time and kept
    for ever (tests/labeling/test_queue_concurrency.py checks the labeling requests).
    """
    params = params or {}
    if connection.dialect.name != "postgresql":
        return connection.execute(statement, params)
    plain = _driver_statement(statement, tuple(params), connection.dialect)
    if plain is None:
        return connection.execute(statement, params)
    raw = connection.connection.driver_connection
    assert raw is not None
    cursor = raw.cursor()
    cursor.execute(plain.sql, {**plain.defaults, **params})
    return _DriverResult(cursor, plain.row_type)


@dataclass(frozen=True)
class _DriverStatement:
    sql: str
    defaults: dict[str, Any]
    """Values SQLAlchemy bound itself (literals in the statement)."""
    row_type: Callable[[Sequence[Any]], Any] | None
    """Makes a row with named columns of a result tuple; None for no rows."""


_driver_statements: dict[tuple[int, tuple[str, ...]], tuple[Executable, Any]] = {}


def _driver_statement(
    statement: Executable, keys: tuple[str, ...], dialect: Dialect
) -> _DriverStatement | None:
    """The statement as the driver takes it, compiled once; None if it needs SQLAlchemy."""
    cache_key = (id(statement), keys)
    cached = _driver_statements.get(cache_key)
    if cached is not None and cached[0] is statement:  # the entry keeps the statement alive
        return cast(_DriverStatement | None, cached[1])
    assert isinstance(statement, ClauseElement)
    compiled = cast(SQLCompiler, statement.compile(dialect=dialect, column_keys=list(keys)))
    binds = compiled.binds.values()
    columns = compiled._result_columns
    plain = not (
        compiled.insert_prefetch
        or compiled.update_prefetch
        or any(bind.expanding or _needs_processing(bind.type, dialect) for bind in binds)
        or any(entry.type._cached_result_processor(dialect, None) is not None for entry in columns)
    )
    # Rows are named from the compiled statement: asking the cursor for its description
    # would build the column objects again on every execution.
    row_type = _row_maker([entry.keyname for entry in columns]) if columns else None
    found = _DriverStatement(*_constants_written_in(compiled, keys), row_type) if plain else None
    _driver_statements[cache_key] = (statement, found)
    return found


def _constants_written_in(
    compiled: SQLCompiler, keys: tuple[str, ...]
) -> tuple[str, dict[str, Any]]:
    """The SQL with the statement's own values (``LIMIT 1``, ``= 'open'``) written in as
    literals, and the parameters that are left.

    psycopg prepares a statement run often; Postgres then plans it once for every call (a
    generic plan) only if it can cost that plan as well as one made for the call's values.
    With the LIMIT or a filter's constant sent as a parameter it cannot, and it planned the
    head-of-queue query anew on every call: 0.5 ms under load, more than running it.
    Values the caller passes stay parameters.
    """
    sql = compiled.string
    parameters: dict[str, Any] = {}
    for name, value in compiled.params.items():
        bind = compiled.binds[name]
        if name in keys or value is None or bind.callable is not None:
            parameters[name] = value
            continue
        try:
            literal = compiled.render_literal_value(value, bind.type)
        except (CompileError, NotImplementedError):  # a type with no literal form
            parameters[name] = value
            continue
        sql = sql.replace(f"%({name})s", literal.replace("%", "%%"))
    return sql, parameters


def _row_maker(names: list[str]) -> Callable[[Sequence[Any]], Any]:
    row: Any = namedtuple("Row", names, rename=True)  # type: ignore[misc]
    make: Callable[[Sequence[Any]], Any] = row._make
    return make


def _needs_processing(type_: TypeEngine[Any], dialect: Dialect) -> bool:
    # Boolean's processor only checks that the value is a bool; psycopg sends bools as is.
    return not isinstance(type_, Boolean) and type_._cached_bind_processor(dialect) is not None


class _DriverResult:
    def __init__(self, cursor: Any, row_type: Callable[[Sequence[Any]], Any] | None) -> None:
        self._cursor = cursor
        self._row_type = row_type

    @property
    def rowcount(self) -> int:
        count: int = self._cursor.rowcount
        return count

    def first(self) -> Any:
        if self._row_type is None:
            return None
        row = self._cursor.fetchone()
        return None if row is None else self._row_type(row)

    def one(self) -> Any:
        row = self.first()
        if row is None or self._cursor.fetchone() is not None:
            raise NoResultFound("expected exactly one row")
        return row

    def scalar(self) -> Any:
        row = self.first()
        return None if row is None else row[0]

    def all(self) -> list[Any]:
        if self._row_type is None:
            return []
        return [self._row_type(row) for row in self._cursor.fetchall()]


def rows_changed(result: Result[Any] | StatementResult) -> int:
    """How many rows an UPDATE or DELETE touched (Session.execute types it loosely)."""
    return (
        result.rowcount
        if isinstance(result, _DriverResult)
        else cast(CursorResult[Any], result).rowcount
    )
