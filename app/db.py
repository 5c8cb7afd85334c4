"""Engine and sessions for SQLite (embedded default) and Postgres."""

import asyncio
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Annotated, Any, TypeVar, cast
from weakref import WeakKeyDictionary

from anyio import CapacityLimiter, to_thread
from fastapi import Depends
from sqlalchemy import (
    JSON,
    Connection,
    CursorResult,
    Engine,
    Result,
    Row,
    Table,
    create_engine,
    event,
)
from sqlalchemy.orm import Session, sessionmaker

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
    return create_engine(url, echo=echo, pool_pre_ping=True, pool_size=POOL_SIZE, max_overflow=0)


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
        limiter = _database_limiters[loop] = CapacityLimiter(POOL_SIZE)
    return await to_thread.run_sync(partial(function, *args), limiter=limiter)


def dispose_engines() -> None:
    """Close every pooled connection (tests, and before a forked worker starts)."""
    for engine in _engines.values():
        engine.dispose()
    _engines.clear()
    _factories.clear()


_PLACEHOLDERS = {"qmark": "?", "format": "%s", "pyformat": "%s"}


def insert_values(connection: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert ``rows`` (dicts with the same keys) in one multi-row INSERT, through the driver.

    For the few rows a labeling request writes at once: SQLAlchemy's executemany costs about
    0.4 ms more per call than this one statement. JSON columns are encoded here, as the
    driver sees only plain values.
    """
    if not rows:
        return
    names = list(rows[0])
    json_columns = {name for name in names if isinstance(table.c[name].type, JSON)}
    placeholder = _PLACEHOLDERS[connection.dialect.paramstyle]
    row_sql = "(" + ", ".join([placeholder] * len(names)) + ")"
    statement = f"INSERT INTO {table.name} ({', '.join(names)}) VALUES " + ", ".join(
        [row_sql] * len(rows)
    )
    values = [_plain(row[name], name in json_columns) for row in rows for name in names]
    connection.exec_driver_sql(statement, tuple(values))


def _plain(value: Any, is_json: bool) -> Any:
    # SQL NULL, not the JSON literal null, for absent values (as NullableJSON stores them).
    return json.dumps(value) if is_json and value is not None else value


def rows_changed(result: Result[Any]) -> int:
    """How many rows an UPDATE or DELETE touched (Session.execute types it loosely)."""
    return cast(CursorResult[Any], result).rowcount
