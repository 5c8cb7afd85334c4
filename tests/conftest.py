"""Database fixtures: every database test runs on SQLite and on Postgres.

Postgres tests use fresh databases on STEPLABEL_TEST_POSTGRES_URL's server (default: the
local trust-auth server). Where it is unreachable they are skipped, except under CI=true,
where they fail. The schema is always built through the Alembic migrations.
"""

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from app import schema

POSTGRES_SERVER_URL = os.environ.get(
    "STEPLABEL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
BACKENDS = ["sqlite", "postgres"]
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def _postgres_unavailable() -> str | None:
    try:
        with create_engine(POSTGRES_SERVER_URL).connect() as connection:
            connection.execute(text("SELECT 1"))
    except Exception as error:  # any failure to connect means "no Postgres here"
        return f"Postgres unreachable at {POSTGRES_SERVER_URL}: {error.__class__.__name__}"
    return None


def _admin_execute(statement: str) -> None:
    engine = create_engine(POSTGRES_SERVER_URL, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text(statement))
    engine.dispose()


def _postgres_database_url(name: str) -> str:
    return make_url(POSTGRES_SERVER_URL).set(database=name).render_as_string(hide_password=False)


class DatabaseFactory:
    """Makes fresh, migrated databases of one backend by copying a migrated template."""

    def __init__(self, backend: str, workdir: Path) -> None:
        self.backend = backend
        self.workdir = workdir
        self.created: list[str] = []
        if backend == "sqlite":
            self.template = workdir / "template.db"
            schema.upgrade(f"sqlite:///{self.template}")
        else:
            self.template_name = f"steplabel_tmpl_{uuid.uuid4().hex[:12]}"
            _admin_execute(f'CREATE DATABASE "{self.template_name}"')
            schema.upgrade(_postgres_database_url(self.template_name))

    def new_url(self) -> str:
        name = f"steplabel_test_{uuid.uuid4().hex[:12]}"
        if self.backend == "sqlite":
            path = self.workdir / f"{name}.db"
            shutil.copyfile(self.template, path)
            return f"sqlite:///{path}"
        return self._new_postgres(name, f'TEMPLATE "{self.template_name}"')

    def new_empty_url(self) -> str:
        """A Postgres database without the schema (pg_restore fills it)."""
        return self._new_postgres(f"steplabel_test_{uuid.uuid4().hex[:12]}", "")

    def _new_postgres(self, name: str, options: str) -> str:
        _admin_execute(f'CREATE DATABASE "{name}" {options}')
        self.created.append(name)
        return _postgres_database_url(name)

    def drop_all(self) -> None:
        if self.backend == "postgres":
            for name in [*self.created, self.template_name]:
                _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgres_available() -> None:
    reason = _postgres_unavailable()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (required under CI=true)")
    pytest.skip(reason)


@pytest.fixture(scope="session", params=BACKENDS)
def database_factory(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DatabaseFactory]:
    backend: str = request.param
    if backend == "postgres":
        request.getfixturevalue("postgres_available")
    factory = DatabaseFactory(backend, tmp_path_factory.mktemp(backend))
    yield factory
    factory.drop_all()


@pytest.fixture
def database_url(database_factory: DatabaseFactory, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh, migrated database, also made the configured one (for the CLI and the app)."""
    url = database_factory.new_url()
    monkeypatch.setenv("STEPLABEL_DATABASE_URL", url)
    from app.config import get_settings

    get_settings.cache_clear()
    return url


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    from app import db

    engine = db.get_engine(database_url)
    yield engine
    db.dispose_engines()


@pytest.fixture
def session(engine: Engine) -> Iterator[Session]:
    """A session inside a transaction that is rolled back after the test."""
    with engine.connect() as connection:
        transaction = connection.begin()
        session = Session(bind=connection, join_transaction_mode="create_savepoint")
        yield session
        session.close()
        transaction.rollback()


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(autouse=True)
def _fresh_settings() -> Iterator[None]:
    from app.config import get_settings

    get_settings.cache_clear()
    yield
    get_settings.cache_clear()
