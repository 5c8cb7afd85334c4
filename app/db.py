"""Engine and sessions for SQLite (embedded default) and Postgres."""

import asyncio
import functools
import json
import time
from collections import namedtuple
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, Protocol, TypeVar, cast
from weakref import WeakKeyDictionary

from anyio import CapacityLimiter, to_thread
from fastapi import Depends
from sqlalchemy import (
    JSON,
    Boolean,
    Connection,
    CursorResult,
    Engine,
    Executable,
    Result,
    Row,
    Table,
    create_engine,
    event,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DisconnectionError, NoResultFound
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement
from sqlalchemy.types import TypeEngine

from app.config import get_settings


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def _enable_sqlite_features(dbapi_connection: Any, _record: Any) -> None:
    # SQLite leaves foreign keys off by default; WAL lets readers work beside one writer.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()
    # Let SQLAlchemy, not the driver, open transactions (see _begin_immediate).
    dbapi_connection.isolation_level = None


def _begin_immediate(connection: Connection) -> None:
    # A deferred transaction that reads, then writes, fails at once with "database is
    # locked" when another writer got in between; taking the write lock up front makes
    # concurrent requests wait their turn instead (SQLite's busy timeout).
    connection.exec_driver_sql("BEGIN IMMEDIATE")


AnyRow = Row[*tuple[Any, ...]]
"""A result row of any columns."""

POOL_SIZE = 20
"""Connections per process, and requests that may hold a session at once (see DbSession)."""


def make_engine(url: str, *, echo: bool = False) -> Engine:
    """An engine for ``url`` with the per-database settings steplabel relies on."""
    if is_sqlite(url):
        engine = create_engine(
            url, echo=echo, connect_args={"check_same_thread": False, "timeout": 30}
        )
        event.listen(engine, "connect", _enable_sqlite_features)
        event.listen(engine, "begin", _begin_immediate)
        return engine
    # No overflow: requests beyond the pool wait in DbSession's limit, not for a socket.
    engine = create_engine(url, echo=echo, pool_size=POOL_SIZE, max_overflow=0)
    event.listen(engine.pool, "checkin", _note_checkin)
    event.listen(engine.pool, "checkout", partial(_ping_if_idle, engine.dialect))
    return engine


PING_AFTER_IDLE_S = 10.0
"""A pooled connection idle this long is checked with a ping before a request gets it.

A connection in steady use is not (SQLAlchemy's pool_pre_ping would spend a round trip on
every request); one idle through a database restart is, and is replaced. One in use while
the database restarts fails its request once, and the pool then reconnects.
"""


def _note_checkin(_dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    record.info["checked_in_at"] = time.monotonic()


def _ping_if_idle(
    dialect: Dialect,
    dbapi_connection: Any,
    record: ConnectionPoolEntry,
    _proxy: PoolProxiedConnection,
) -> None:
    checked_in_at = record.info.get("checked_in_at")
    if checked_in_at is None or time.monotonic() - checked_in_at < PING_AFTER_IDLE_S:
        return  # new (just connected), or in steady use
    try:
        dialect.do_ping(dbapi_connection)
    except dialect.loaded_dbapi.Error as error:
        # The pool drops this connection and checks out (or opens) another.
        raise DisconnectionError(f"idle connection lost: {error}") from error


_engines: dict[str, Engine] = {}


def get_engine(url: str | None = None) -> Engine:
    """The shared engine for ``url`` (default: the configured database)."""
    settings = get_settings()
    url = url or settings.database_url
    if url not in _engines:
        _engines[url] = make_engine(url, echo=settings.sql_echo)
    return _engines[url]


_factories: dict[Engine, sessionmaker[Session]] = {}


def session_factory(engine: Engine) -> sessionmaker[Session]:
    if engine not in _factories:
        _factories[engine] = sessionmaker(bind=engine, expire_on_commit=False)
    return _factories[engine]


@contextmanager
def transaction(engine: Engine | None = None) -> Iterator[Session]:
    """One unit of work: commit when the block succeeds, roll back when it raises."""
    session = session_factory(engine or get_engine())()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def get_session() -> Iterator[Session]:
    """FastAPI dependency: one session per request, committed when the request succeeds."""
    with transaction() as session:
        yield session


# Committed before the response goes out (scope="function"): a labeler who gets an answer
# can count on it being stored. At most POOL_SIZE requests hold a session at once; the
# others wait without taking a worker thread, so the pool cannot run dry mid-request.
# Every route shares this one Depends object, and with it the limit.
DbSession = Annotated[Session, Depends(get_session, scope="function", max_concurrency=POOL_SIZE)]


@contextmanager
def core_transaction(engine: Engine | None = None) -> Iterator[Connection]:
    """One unit of work on a plain connection, without an ORM session: commit when the block
    succeeds, roll back when it raises. For the labeling requests, the hottest in the app,
    where the session's own bookkeeping costs more than their few statements."""
    with (engine or get_engine()).begin() as connection:
        yield connection


T = TypeVar("T")

DATABASE_THREADS = 2
"""Threads per process doing labeling requests' database work at once. More do not go
faster (each needs the GIL between round trips): requests then queue for the GIL, unfairly,
instead of in order on the event loop. Under 64 labelers at once (bench/labeling_load.py),
p99 latency was 205 ms with 2 threads a process, 350-500 ms with 8 and 20."""

# Threads for the labeling requests, which do all their database work in one hop (see
# in_database_thread). They are not the threads of ordinary routes: a request waiting here
# for a connection never holds one, and never keeps a DbSession route from its next step.
_database_limiters: WeakKeyDictionary[asyncio.AbstractEventLoop, CapacityLimiter] = (
    WeakKeyDictionary()
)


async def in_database_thread(function: Callable[..., T], *args: Any) -> T:
    """Run ``function(*args)`` in a worker thread, at most POOL_SIZE at once per process.

    A route that does its whole unit of work in one such call crosses between the event
    loop and a thread once, not once per dependency (each crossing costs about 0.1 ms).
    """
    loop = asyncio.get_running_loop()
    limiter = _database_limiters.get(loop)
    if limiter is None:
        limiter = _database_limiters[loop] = CapacityLimiter(DATABASE_THREADS)
    return await to_thread.run_sync(partial(function, *args), limiter=limiter)


def dispose_engines() -> None:
    """Close every pooled connection (tests, and before a forked worker starts)."""
    for engine in _engines.values():
        engine.dispose()
    _engines.clear()
    _factories.clear()


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
    found = _DriverStatement(compiled.string, dict(compiled.params), row_type) if plain else None
    _driver_statements[cache_key] = (statement, found)
    return found


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
