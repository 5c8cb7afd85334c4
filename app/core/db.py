"""Engine and sessions for SQLite (embedded default) and Postgres."""

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial, wraps
from typing import Annotated, Any, ParamSpec, TypeVar
from weakref import WeakKeyDictionary

import psycopg
from anyio import CapacityLimiter, to_thread
from fastapi import Depends
from sqlalchemy import (
    Connection,
    Engine,
    create_engine,
    event,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

from app.core.config import get_settings

logger = logging.getLogger("steplabel.db")


SQLITE_MMAP_BYTES = 256 << 20
"""Address space, not memory: the OS pages the file in as it is read."""


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def _enable_sqlite_features(dbapi_connection: Any, _record: Any) -> None:
    # SQLite leaves foreign keys off by default; WAL lets readers work beside one writer.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    # Pages read through a memory map, not a system call each: a pull reads 50 MB of
    # stored text per 10,000 labels (0.25 s -> 0.14 s of reading, bench/api_export.py).
    cursor.execute(f"PRAGMA mmap_size={SQLITE_MMAP_BYTES}")
    cursor.close()
    # Let SQLAlchemy, not the driver, open transactions (see _begin_immediate).
    dbapi_connection.isolation_level = None


def _begin_immediate(connection: Connection) -> None:
    # A deferred transaction that reads, then writes, fails at once with "database is
    # locked" when another writer got in between; taking the write lock up front makes
    # concurrent requests wait their turn instead (SQLite's busy timeout).
    connection.exec_driver_sql("BEGIN IMMEDIATE")


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
the database restarts fails its request once (a 503, app/main.py), and the pool then
reconnects.
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


DATABASE_AWAY: tuple[type[Exception], ...] = (
    OperationalError,
    InterfaceError,
    DisconnectionError,
    PoolTimeout,
    # The labeling requests run their statements through the driver (app/core/statements.py):
    # its errors reach the app unwrapped.
    psycopg.OperationalError,
    psycopg.InterfaceError,
)
"""What SQLAlchemy raises when the database cannot be reached or dropped the connection (a
restart, a failover, pg_terminate_backend, SQLite's busy timeout run out), among other
things: ``is_database_away`` tells which. Such a request is answered 503 with Retry-After
(app/main.py), and the worker waits and tries again. After a dropped connection SQLAlchemy
discards every pooled connection older than the failure (it invalidates the pool), and the
idle ping below catches the rest: the pool recovers without a restart."""

AWAY_SQLSTATE_CLASSES = ("08", "53", "57P")
"""Postgres's connection exceptions, insufficient resources (too many connections) and
operator intervention (an administrator's shutdown or pg_terminate_backend, a crash, a
server still starting)."""

RETRY_AFTER_S = 3
"""What a 503 for an unreachable database asks clients to wait, in seconds: a Postgres
restart under load took about 3 s (issue 43)."""


def first_line(error: BaseException) -> str:
    """The driver's message of ``error`` in one line, for a log."""
    cause = error.orig if isinstance(error, DBAPIError) else error
    return (str(cause).strip().splitlines() or [type(cause).__name__])[0]


def is_database_away(error: BaseException) -> bool:
    """Whether ``error`` says the database is unreachable for now, not that a statement
    was wrong (a missing table is an OperationalError on SQLite too, and stays a 500)."""
    if isinstance(error, DisconnectionError | PoolTimeout):
        return True
    if isinstance(error, DBAPIError):
        if error.connection_invalidated:
            return True
        cause: BaseException | None = error.orig
    elif isinstance(error, psycopg.Error):
        cause = error
    else:
        return False
    if isinstance(cause, psycopg.Error):
        # No SQLSTATE: the client's own failure to connect, or a connection found closed.
        state = cause.sqlstate
        return state is None or state.startswith(AWAY_SQLSTATE_CLASSES)
    message = str(cause).lower()
    return "database is locked" in message or "unable to open database" in message


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
def core_autocommit(engine: Engine | None = None) -> Iterator[Connection]:
    """A plain connection whose statements each commit by themselves (Postgres): no BEGIN
    and no COMMIT to wait for, two round trips fewer. Only for units of work whose every
    write is one statement that is safe alone (a unique key or a row lock settles any
    race): the labeling requests, the hottest in the app, where an ORM session's own
    bookkeeping would cost more than their few statements. SQLite gets a transaction
    instead: its writers take turns by it (``BEGIN IMMEDIATE``)."""
    engine = engine or get_engine()
    if is_sqlite(engine.url.drivername):
        with engine.begin() as connection:
            yield connection
        return
    with engine.connect() as connection:
        try:
            yield connection.execution_options(isolation_level="AUTOCOMMIT")
        except psycopg.Error:
            # Statements run through the driver here, so SQLAlchemy did not see the error:
            # a connection the server dropped is closed now, not handed back to the pool.
            driver = connection.connection.dbapi_connection
            if driver is not None and driver.closed:
                connection.invalidate()
            raise


T = TypeVar("T")
P = ParamSpec("P")

CONFLICTS = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)
"""What Postgres ends a statement with to let a concurrent one go on: run again, the work
almost always succeeds."""


def is_conflict(error: BaseException) -> bool:
    """Whether ``error`` is one of CONFLICTS, raised by psycopg or wrapped by SQLAlchemy."""
    cause = error.orig if isinstance(error, DBAPIError) else error
    return isinstance(cause, CONFLICTS)


def retried_once_on_conflict(unit: Callable[P, T]) -> Callable[P, T]:
    """``unit`` run a second time if the database ended it with a deadlock or serialization
    failure, so that such a failure never reaches a user as a 500.

    Only for units of work that are safe to start again: each opens its own connection, and
    what a first try committed (a claimed task, a stored label) the second finds."""

    @wraps(unit)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return unit(*args, **kwargs)
        except Exception as error:
            if not is_conflict(error):
                raise
            logger.warning("%s: %s; trying once more", unit.__name__, str(error).splitlines()[0])
        return unit(*args, **kwargs)

    return run


AWAY_RETRY_MAX_S = 30.0
"""The longest wait between two tries of ``retried_while_away``."""


def retried_while_away(
    unit: Callable[[], T], what: str, give_up: Callable[[], bool] = lambda: False
) -> T:
    """``unit()``, tried again while the database is unreachable (waits from 1 s, doubling
    to AWAY_RETRY_MAX_S), so that what it records is recorded once the database is back: a
    restart does not leave a run or an import "running" for good. Any other error, or
    ``give_up()`` saying so, is raised. ``what`` names it in the log."""
    wait = 1.0
    while True:
        try:
            return unit()
        except Exception as failure:
            if not is_database_away(failure) or give_up():
                raise
            logger.warning(
                "%s: the database is away (%s); again in %.0f s", what, first_line(failure), wait
            )
        time.sleep(wait)
        wait = min(wait * 2, AWAY_RETRY_MAX_S)


DATABASE_THREADS = 4
"""Threads per process doing labeling requests' database work at once. More do not go
faster (each needs the GIL between round trips): requests then queue for the GIL, unfairly,
instead of in order on the event loop. With 64 labelers at once (bench/labeling_load.py,
two processes), throughput was the same from 4 to 8 threads and p99 latency 240-300 ms
with 4, 340-370 ms with 8; with 20 the slowest requests took up to 500 ms."""

# Threads for the labeling requests, which do all their database work in one hop (see
# in_database_thread). They are not the threads of ordinary routes: a request waiting here
# for a connection never holds one, and never keeps a DbSession route from its next step.
_database_limiters: WeakKeyDictionary[asyncio.AbstractEventLoop, CapacityLimiter] = (
    WeakKeyDictionary()
)


async def in_database_thread(function: Callable[..., T], *args: Any) -> T:
    """Run ``function(*args)`` in a worker thread, at most DATABASE_THREADS at once.

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
