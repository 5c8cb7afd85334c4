"""Engine and sessions for SQLite (embedded default) and Postgres."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, cast

from fastapi import Depends
from sqlalchemy import Connection, CursorResult, Engine, Result, create_engine, event
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


def dispose_engines() -> None:
    """Close every pooled connection (tests, and before a forked worker starts)."""
    for engine in _engines.values():
        engine.dispose()
    _engines.clear()
    _factories.clear()


def rows_changed(result: Result[Any]) -> int:
    """How many rows an UPDATE or DELETE touched (Session.execute types it loosely)."""
    return cast(CursorResult[Any], result).rowcount
