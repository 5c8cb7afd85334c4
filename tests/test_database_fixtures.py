"""The database fixtures (tests/conftest.py): the tests of one process share its database,
so what a test commits must be gone, ids included, before the next one starts."""

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from app.core.db import make_engine, transaction
from app.models import User
from tests.conftest import DatabaseFactory
from tests.factories import make_user


@pytest.fixture
def own_engine(database_url: str) -> Iterator[Engine]:
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


def add_user(engine: Engine, name: str, *, commit: bool) -> int:
    """A user's id; committed, or rolled back (Postgres's sequence moves on all the same)."""
    with Session(engine) as session:
        user_id = make_user(session, name).id
        if commit:
            session.commit()
    return user_id


@pytest.mark.parametrize("commit", [True, False], ids=["committed", "rolled-back"])
def test_clearing_leaves_no_rows_and_ids_from_one(
    database_factory: DatabaseFactory, database_url: str, own_engine: Engine, commit: bool
) -> None:
    add_user(own_engine, "alice", commit=commit)
    add_user(own_engine, "bob", commit=commit)

    database_factory.clear_own()

    assert database_factory.own_url() == database_url
    with transaction(own_engine) as session:
        assert session.scalar(select(func.count()).select_from(User)) == 0
    assert add_user(own_engine, "carol", commit=True) == 1
