"""The Alembic migrations build the schema the models describe, and undo it."""

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import func, inspect, select
from sqlalchemy.orm import Session

from app.auth import tokens
from app.core import schema
from app.core.db import make_engine
from app.models import ApiToken, Base, Label, Role, TaskStyle
from tests.factories import make_label, make_solution, make_user


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


def test_phase1_labels_lose_their_generation_and_get_it_back(database_factory: object) -> None:
    # Revision 0010: labels of phase-1 tasks, stored with their solution's generation
    # before, carry none (as PRM800K's phase 1); downgrade gives it back.
    url = database_factory.new_url()  # type: ignore[attr-defined]
    engine = make_engine(url)
    try:
        # Made with today's models, then taken back to 0009: the rows of today's tables
        # would not go into 0009's.
        with Session(engine) as session:
            labeler = make_user(session, "alice")
            phase1 = make_solution(session, generation=3)
            phase1.style = TaskStyle.PHASE1.value
            phase2 = make_solution(session, generation=3)
            labels = [make_label(session, labeler, s, [[1], [1]]) for s in (phase1, phase2)]
            session.commit()
            ids = [label.id for label in labels]

        def generations() -> list[int | None]:
            # The column alone: the models' other label columns may postdate 0009.
            with Session(engine) as session:
                rows = session.execute(select(Label.id, Label.generation))
                found = {label_id: generation for label_id, generation in rows}
                return [found[label_id] for label_id in ids]

        schema.downgrade(url, "0009")
        assert generations() == [3, 3]
        schema.upgrade(url)
        assert generations() == [None, 3]
        schema.downgrade(url, "0009")
        assert generations() == [3, 3]
    finally:
        engine.dispose()


def test_stored_text_is_compressed_with_lz4_on_postgres_and_back(database_factory: object) -> None:
    # Revision 0016: lz4 in place of pglz for the text a pull reads (issue 40).
    url = database_factory.new_url()  # type: ignore[attr-defined]
    engine = make_engine(url)
    columns = "attrelid IN ('labels'::regclass, 'solutions'::regclass)"
    columns += " AND attname IN ('prm800k_label', 'prm800k_question')"

    def methods() -> set[str]:
        with engine.connect() as connection:
            found = f"SELECT attcompression FROM pg_attribute WHERE {columns}"
            return set(connection.exec_driver_sql(found).scalars())

    try:
        if engine.dialect.name != "postgresql":
            schema.downgrade(url, "0015")  # nothing to undo on SQLite, and nothing fails
            schema.upgrade(url)
            return
        assert methods() == {"l"}
        with Session(engine) as session:
            label = make_label(session, make_user(session, "lab"), make_solution(session), [[1]])
            label.prm800k_label = "[" + ", ".join(str(n) for n in range(5000)) + "]"
            session.commit()
            written = select(func.pg_column_compression(Label.prm800k_label))
            assert session.scalar(written) == "lz4"
        schema.downgrade(url, "0015")
        assert methods() == {""}  # the server's default
        schema.upgrade(url)
        assert methods() == {"l"}
    finally:
        engine.dispose()


def test_deactivated_users_tokens_are_revoked_and_stay_so(database_factory: object) -> None:
    # Revision 0018: a user deactivated before deactivation revoked tokens kept live ones,
    # which their reactivation would bring back.
    url = database_factory.new_url()  # type: ignore[attr-defined]
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            gone, still = make_user(session, "gone", role=Role.ADMIN), make_user(session, "ada")
            made = [
                tokens.create_token(session, user, "t", frozenset())[0] for user in (gone, still)
            ]
            gone.is_active = False  # as deactivation left a user before 0018
            session.commit()
            ids = [token.id for token in made]

        def revoked() -> list[bool]:
            with Session(engine) as session:
                return [session.get_one(ApiToken, i).revoked_at is not None for i in ids]

        schema.downgrade(url, "0017")
        assert revoked() == [False, False]
        schema.upgrade(url)
        assert revoked() == [True, False]
        schema.downgrade(url, "0017")
        assert revoked() == [True, False]
    finally:
        engine.dispose()
