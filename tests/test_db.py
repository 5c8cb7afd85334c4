"""Engines: a pooled Postgres connection that died while idle is replaced, not handed out."""

import pytest
from sqlalchemy import text

from app.core import db
from tests.conftest import DatabaseFactory


def test_a_connection_killed_while_idle_is_replaced(
    database_factory: DatabaseFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    if database_factory.backend != "postgres":
        pytest.skip("SQLite has no server to lose")
    engine = db.make_engine(database_factory.new_url())
    backend = text("SELECT pg_backend_pid()")
    try:
        with engine.connect() as first, engine.connect() as second:
            victim = first.scalar(backend)
            first.close()  # back to the pool, idle
            # The other pooled connection ends the idle one's server process.
            assert second.scalar(text("SELECT pg_terminate_backend(:pid)"), {"pid": victim})
            second.commit()
        monkeypatch.setattr(db, "PING_AFTER_IDLE_S", 0.0)
        # Both pooled connections are handed out, and both work: the dead one was replaced.
        with engine.connect() as one, engine.connect() as two:
            assert victim not in {one.scalar(backend), two.scalar(backend)}
    finally:
        engine.dispose()


def test_a_connection_in_steady_use_is_not_pinged(
    database_factory: DatabaseFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    if database_factory.backend != "postgres":
        pytest.skip("SQLite has no pool pings")
    engine = db.make_engine(database_factory.new_url())
    pings: list[object] = []
    monkeypatch.setattr(engine.dialect, "do_ping", pings.append)
    try:
        for _ in range(3):
            with engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        assert pings == []
        monkeypatch.setattr(db, "PING_AFTER_IDLE_S", 0.0)
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        assert len(pings) == 1
    finally:
        engine.dispose()
