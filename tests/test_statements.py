"""``run`` gives what SQLAlchemy gives, through the driver on Postgres; ``insert_values``."""

from datetime import datetime

import pytest
from sqlalchemy import Engine, bindparam, func, select
from sqlalchemy.exc import NoResultFound
from sqlalchemy.orm import Session

from app import statements
from app.models import LABEL_STEPS
from tests.factories import make_rated_label, make_solution, make_user


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
            statements.run(
                connection, insert, {"name": name, "uuid": name, "role": "labeler", **USER_DEFAULTS}
            ).scalar()
            for name in ("ada", "alan")
        ]
        row = statements.run(connection, by_name, {"wanted": "alan"}).one()
        assert (row.id, row.who, row.is_active) == (ids[1], "alan", True)
        assert tuple(row) == tuple(connection.execute(by_name, {"wanted": "alan"}).one())
        assert statements.run(connection, by_name, {"wanted": "nobody"}).first() is None
        with pytest.raises(NoResultFound):
            statements.run(connection, by_name, {"wanted": "nobody"}).one()
        assert statements.rows_changed(statements.run(connection, rename, {"pattern": "a%"})) == 2
        assert connection.scalar(select(func.count()).where(USERS.c.role == "admin")) == 2
    if engine.dialect.name == "postgresql":  # these went through the driver
        assert statements._driver_statement(by_name, ("wanted",), engine.dialect) is not None
        assert statements._driver_statement(rename, ("pattern",), engine.dialect) is not None


def test_run_leaves_statements_that_need_processing_to_sqlalchemy(engine: Engine) -> None:
    """A JSON parameter needs SQLAlchemy's processing: ``run`` gives it SQLAlchemy's path."""
    from app.models import PROJECT_SETTINGS

    upsert = PROJECT_SETTINGS.insert()
    value = {"nested": [1, 2, {"three": None}]}
    with engine.begin() as connection:
        statements.run(
            connection, upsert, {"key": "k", "value": value, "updated_at": datetime(2026, 1, 1)}
        )
        stored = select(PROJECT_SETTINGS.c.value).where(PROJECT_SETTINGS.c.key == "k")
        assert statements.run(connection, stored).scalar() == value
    if engine.dialect.name == "postgresql":
        keys = ("key", "value", "updated_at")
        assert statements._driver_statement(upsert, keys, engine.dialect) is None


USER_DEFAULTS = {
    "password_hash": None,
    "is_active": True,
    "is_approved": False,
    "session_version": 0,
    "created_at": datetime(2026, 1, 1),
}


def test_insert_values_writes_json_and_sql_nulls(session: Session) -> None:
    """Rows go in as one statement; a JSON column keeps its value, and None is SQL NULL."""
    labeler = make_user(session, "ada")
    solution = make_solution(session)
    label = make_rated_label(session, labeler, solution, [1])
    human = {"text": "My own step.", "rating": None, "source": "human", "flagged": False}
    rows = [
        {
            "label_id": label.id,
            "step_index": 5,
            "chosen_completion": None,
            "human_completion": human,
        },
        {"label_id": label.id, "step_index": 6, "chosen_completion": 0, "human_completion": None},
    ]
    statements.insert_values(session.connection(), LABEL_STEPS, rows)
    stored = session.execute(
        select(
            LABEL_STEPS.c.step_index,
            LABEL_STEPS.c.human_completion,
            LABEL_STEPS.c.human_completion.is_(None),
        )
        .where(LABEL_STEPS.c.label_id == label.id, LABEL_STEPS.c.step_index >= 5)
        .order_by(LABEL_STEPS.c.step_index)
    ).all()
    assert [tuple(row) for row in stored] == [(5, human, False), (6, None, True)]


def test_the_statements_own_values_are_written_into_the_sql(engine: Engine) -> None:
    """A LIMIT or a constant goes to Postgres as SQL, so that a prepared statement can be
    planned once for every call; the values a caller passes stay parameters."""
    from app.models import USERS

    first_named = (
        select(USERS.c.name)
        .where(
            USERS.c.role == "labeler",
            USERS.c.name.like("al%"),  # a % in a literal, where psycopg reads placeholders
            USERS.c.name.like(bindparam("pattern")),
        )
        .order_by(USERS.c.name)
        .limit(1)
    )
    with engine.begin() as connection:
        for name, role in (("ada", "admin"), ("alan", "labeler"), ("alonzo", "labeler")):
            statements.run(
                connection,
                USERS.insert(),
                {"name": name, "uuid": name, "role": role, **USER_DEFAULTS},
            )
        assert statements.run(connection, first_named, {"pattern": "a%"}).scalar() == "alan"
        assert statements.run(connection, first_named, {"pattern": "%zo"}).scalar() == "alonzo"
        assert statements.run(connection, first_named, {"pattern": "b%"}).first() is None
    if engine.dialect.name == "postgresql":
        plain = statements._driver_statement(first_named, ("pattern",), engine.dialect)
        assert plain is not None
        assert "users.role = 'labeler'" in plain.sql
        assert "LIMIT 1" in plain.sql
        assert "%(pattern)s" in plain.sql
        assert set(plain.defaults) == {"pattern"}
