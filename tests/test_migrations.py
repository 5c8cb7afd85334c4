"""The Alembic migrations build the schema the models describe, and undo it."""

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from app import schema
from app.db import make_engine
from app.models import Base


def test_upgrade_matches_models_and_downgrade_empties(database_factory: object) -> None:
    url = database_factory.new_url()  # type: ignore[attr-defined]
    schema.downgrade(url, "base")
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            assert set(inspect(connection).get_table_names()) <= {"alembic_version"}
        schema.upgrade(url)
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
            tables = set(inspect(connection).get_table_names())
            assert set(Base.metadata.tables) <= tables
        schema.downgrade(url, "base")
        with engine.connect() as connection:
            assert set(inspect(connection).get_table_names()) <= {"alembic_version"}
    finally:
        engine.dispose()
