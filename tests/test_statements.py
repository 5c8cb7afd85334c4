"""The labeling repository's statements: on Postgres psycopg runs them, and gives what
SQLAlchemy gives; their own values are written into their SQL."""

import pytest
from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from app.labeling import repository
from app.labeling.repository import _constant, _statement, execute
from app.models import USERS
from tests.factories import make_user


def test_execute_gives_the_rows_sqlalchemy_gives(session: Session) -> None:
    by_name = _statement(
        select(USERS.c.id, USERS.c.name.label("who"), USERS.c.is_active, USERS.c.created_at)
        .where(USERS.c.name.like(bindparam("pattern")), USERS.c.name.like(_constant("a%")))
        .order_by(USERS.c.name)
    )
    rename = _statement(
        USERS.update()
        .where(USERS.c.name.like(bindparam("pattern")))
        .values(role=_constant("admin"))
    )
    ids = [make_user(session, name).id for name in ("ada", "alan", "alonzo")]
    connection = session.connection()
    rows = execute(connection, by_name, {"pattern": "al%"}).fetchall()
    assert [(row.id, row.who, row.is_active) for row in rows] == [
        (ids[1], "alan", True),
        (ids[2], "alonzo", True),
    ]
    expected = connection.execute(by_name.core, {"pattern": "al%"}).all()
    assert [tuple(row) for row in rows] == [tuple(row) for row in expected]
    assert execute(connection, by_name, {"pattern": "nobody"}).fetchone() is None
    assert execute(connection, rename, {"pattern": "a%"}).rowcount == 3
    roles = connection.execute(select(USERS.c.role).where(USERS.c.id.in_(ids))).scalars()
    assert set(roles) == {"admin"}


def test_the_statements_own_values_are_written_into_the_sql() -> None:
    """A LIMIT or a constant goes to Postgres as SQL, so that a prepared statement can be
    planned once for every call; the values a caller passes stay parameters."""
    head = repository._HEADS_UNLOCKED[0].postgres_sql
    assert "solutions.queue_state = 'open'" in head
    assert "solutions.generation != -1" in head
    assert "LIMIT 1 FOR NO KEY UPDATE OF solutions SKIP LOCKED" in head
    assert "%(labeler_id)s" in head
    quoted = _statement(select(USERS.c.id).where(USERS.c.name == _constant("o'k%")))
    assert "users.name = 'o''k%%'" in quoted.postgres_sql  # psycopg reads %% as %


def test_a_value_of_the_statement_itself_must_be_written_in() -> None:
    with pytest.raises(AssertionError, match="constants"):
        _statement(select(USERS.c.id).where(USERS.c.role == "admin"))
