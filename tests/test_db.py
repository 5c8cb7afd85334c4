"""Engines and statements: idle connections that died are replaced; ``run`` gives what
SQLAlchemy gives, through the driver on Postgres."""

from datetime import datetime

import pytest
from sqlalchemy import Engine, bindparam, func, select, text
from sqlalchemy.exc import NoResultFound

from app import db
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


def test_run_gives_the_rows_sqlalchemy_gives(engine: Engine) -> None:
    """``run`` (the driver path on Postgres) returns what ``Connection.execute`` returns."""
    from app.models import USERS

    insert = USERS.insert().returning(USERS.c.id)
    by_name = select(USERS.c.id, USERS.c.name.label("who"), USERS.c.is_active).where(
        USERS.c.name == bindparam("wanted")
    )
    rename = USERS.update().where(USERS.c.name.like(bindparam("pattern"))).values(role="admin")
    with engine.begin() as connection:
        ids = [
            db.run(
                connection, insert, {"name": name, "uuid": name, "role": "labeler", **USER_DEFAULTS}
            ).scalar()
            for name in ("ada", "alan")
        ]
        row = db.run(connection, by_name, {"wanted": "alan"}).one()
        assert (row.id, row.who, row.is_active) == (ids[1], "alan", True)
        assert tuple(row) == tuple(connection.execute(by_name, {"wanted": "alan"}).one())
        assert db.run(connection, by_name, {"wanted": "nobody"}).first() is None
        with pytest.raises(NoResultFound):
            db.run(connection, by_name, {"wanted": "nobody"}).one()
        assert db.rows_changed(db.run(connection, rename, {"pattern": "a%"})) == 2
        assert connection.scalar(select(func.count()).where(USERS.c.role == "admin")) == 2
    if engine.dialect.name == "postgresql":  # these went through the driver
        assert db._driver_statement(by_name, ("wanted",), engine.dialect) is not None
        assert db._driver_statement(rename, ("pattern",), engine.dialect) is not None


def test_run_leaves_statements_that_need_processing_to_sqlalchemy(engine: Engine) -> None:
    """A JSON parameter needs SQLAlchemy's processing: ``run`` gives it SQLAlchemy's path."""
    from app.models import PROJECT_SETTINGS

    upsert = PROJECT_SETTINGS.insert()
    value = {"nested": [1, 2, {"three": None}]}
    with engine.begin() as connection:
        db.run(connection, upsert, {"key": "k", "value": value, "updated_at": datetime(2026, 1, 1)})
        stored = select(PROJECT_SETTINGS.c.value).where(PROJECT_SETTINGS.c.key == "k")
        assert db.run(connection, stored).scalar() == value
    if engine.dialect.name == "postgresql":
        keys = ("key", "value", "updated_at")
        assert db._driver_statement(upsert, keys, engine.dialect) is None


USER_DEFAULTS = {
    "password_hash": None,
    "is_active": True,
    "is_approved": False,
    "session_version": 0,
    "created_at": datetime(2026, 1, 1),
}
