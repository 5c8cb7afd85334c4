"""Database fixtures: every database test runs on SQLite and on Postgres.

Postgres tests use databases on STEPLABEL_TEST_POSTGRES_URL's server (default: the local
trust-auth server). Where it is unreachable they are skipped, except under CI=true, where
they fail. The schema is always built through the Alembic migrations.

Each test process (pytest-xdist runs several) migrates one database per backend and runs
every test that asks for ``database_url``, ``engine`` or ``session`` on it: a ``session``
test inside a transaction that is rolled back, a test that commits through the engine, the
app or a subprocess on the real database, emptied after it. A new Postgres database costs
a CREATE and a DROP DATABASE (the DROP a checkpoint, about a second); emptying the own
one costs a query. Tests that need a database to themselves (migrations, a server for a
module) get a fresh copy of the migrated template from ``database_factory.new_url()``.
"""

import gc
import os
import shutil
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine, create_engine, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from app import project_settings
from app.core import schema
from bench import SHARED_DATA

POSTGRES_SERVER_URL = os.environ.get(
    "STEPLABEL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
BACKENDS = ["sqlite", "postgres"]

if os.environ.get("PYTEST_XDIST_WORKER"):
    # A test process per core already: torch's threads (one per core in each process and in
    # each worker subprocess it starts) would fight over the cores, and lose time spinning.
    # Read when torch is first imported, which is after this.
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_unconfigure() -> None:
    """The run is over: leave this process's objects to the OS rather than to the
    collector's passes at interpreter shutdown (2 s of a test process's exit on a 2-core
    EPYC, where it has loaded torch; BENCHMARKS, "The test suite's time", session 27)."""
    gc.freeze()


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


DROP_CONNECTIONS = 8
"""Databases dropped at once at the end of a test process."""


def _drop_database(name: str) -> None:
    _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _postgres_database_url(name: str) -> str:
    return make_url(POSTGRES_SERVER_URL).set(database=name).render_as_string(hide_password=False)


CLEAR_TIMEOUT_S = 10
"""How long emptying the process's database waits for a lock a test's connection still
holds before the process takes a fresh database instead."""


class DatabaseFactory:
    """Migrated databases of one backend: the test process's own, emptied between tests,
    and fresh copies of a migrated template."""

    def __init__(self, backend: str, workdir: Path) -> None:
        self.backend = backend
        self.workdir = workdir
        self.created: list[str] = []
        self._own: tuple[str, Engine] | None = None
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

    def own_url(self) -> str:
        """The test process's own migrated database, empty: no rows but the schema's
        version, sequences at their start."""
        if self._own is None:
            url = self.new_url()
            self._own = (url, self._clearing_engine(url))
        return self._own[0]

    def clear_own(self) -> None:
        """Empty the process's own database after a test. Where a connection the test left
        open holds a lock past CLEAR_TIMEOUT_S, the next test gets a fresh database."""
        if self._own is None:
            return
        _url, engine = self._own
        try:
            with engine.begin() as connection:
                _clear(connection)
        except DBAPIError:
            engine.dispose()
            self._own = None

    def _clearing_engine(self, url: str) -> Engine:
        # Plain engines: SQLite without foreign keys, so rows go in any order; Postgres
        # with a lock timeout, so a lock left held ends the wait.
        if self.backend == "sqlite":
            return create_engine(url, connect_args={"timeout": CLEAR_TIMEOUT_S})
        options = f"-c lock_timeout={CLEAR_TIMEOUT_S * 1000}"
        return create_engine(url, connect_args={"options": options})

    def _new_postgres(self, name: str, options: str) -> str:
        _admin_execute(f'CREATE DATABASE "{name}" {options}')
        self.created.append(name)
        return _postgres_database_url(name)

    def drop_all(self) -> None:
        if self._own is not None:
            self._own[1].dispose()
        if self.backend == "postgres":
            # Each DROP DATABASE waits for a checkpoint; sent at once, they share a few
            # (10 databases: 1.4 s one by one, 0.2 s together, session 27 in BENCHMARKS).
            names = [*self.created, self.template_name]
            with ThreadPoolExecutor(DROP_CONNECTIONS) as pool:
                list(pool.map(_drop_database, names))


REWIND_SEQUENCES = text(
    "SELECT setval(format('%I.%I', schemaname, sequencename), start_value, false)"
    " FROM pg_sequences WHERE schemaname = current_schema() AND last_value IS NOT NULL"
)


def _clear(connection: Connection) -> None:
    """Delete every row but the schema's version, and rewind the sequences: Postgres
    advances them even for rows rolled back, and a test may count on the ids from 1."""
    inspector = inspect(connection)
    quote = connection.dialect.identifier_preparer.quote
    tables = [
        quote(name)
        for name in inspector.get_table_names()
        if name not in {"alembic_version", "sqlite_sequence"}
    ]
    any_rows = " OR ".join(f"EXISTS (SELECT 1 FROM {table})" for table in tables)
    has_rows = connection.scalar(text(f"SELECT {any_rows}"))
    if connection.dialect.name == "postgresql":
        if has_rows:
            connection.execute(text(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY"))
        else:
            connection.execute(REWIND_SEQUENCES)
    elif has_rows:
        for table in tables:
            connection.execute(text(f"DELETE FROM {table}"))
        if inspector.has_table("sqlite_sequence"):
            connection.execute(text("DELETE FROM sqlite_sequence"))


@pytest.fixture(scope="session")
def postgres_available() -> None:
    reason = _postgres_unavailable()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (required under CI=true)")
    pytest.skip(reason)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Drop the Postgres runs of tests marked sqlite_only (or of their parameters marked so):
    the worker's slow end-to-end tests (a subprocess, a model trained), whose SQL the
    repository tests and one end-to-end test already run on both backends, and the browser
    tests but a few (tests/browser/conftest.py), whose routes the HTTP tests run on both."""
    dropped = [
        item
        for item in items
        if item.get_closest_marker("sqlite_only") is not None
        and getattr(item, "callspec", None) is not None
        and item.callspec.params.get("database_factory") == "postgres"
    ]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item not in dropped]


_UNGROUPED = pytest.StashKey[bool]()


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Find the grouped tests that pytest-xdist did not group: under ``--dist loadgroup`` it
    marks them by a suffix to their ids, which some pytest versions drop (9.2 did), and a
    hook that adds the mark after xdist's comes too late. A browser module would then
    start a server in each process, and the model be prepared twice at once."""
    if not getattr(session.config.option, "loadgroup", False):  # set on xdist's processes
        return
    for item in session.items:
        if item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid:
            item.stash[_UNGROUPED] = True


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.stash.get(_UNGROUPED, False):
        pytest.fail(
            "pytest-xdist did not put this test in its xdist_group: check the pytest and"
            " pytest-xdist versions, and that marks are added before xdist reads them"
        )


@pytest.fixture(scope="session")
def database_factories(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, DatabaseFactory]]:
    """Each backend's factory, made when a test first asks for it and kept to the end.

    Not the parametrized fixture's own value: pytest tears that down whenever the next
    test has the other backend, which under pytest-xdist is at almost every module.
    """
    factories: dict[str, DatabaseFactory] = {}
    yield factories
    for factory in factories.values():
        factory.drop_all()


@pytest.fixture(scope="session", params=BACKENDS)
def database_factory(
    request: pytest.FixtureRequest,
    database_factories: dict[str, DatabaseFactory],
    tmp_path_factory: pytest.TempPathFactory,
) -> DatabaseFactory:
    backend: str = request.param
    if backend == "postgres":
        request.getfixturevalue("postgres_available")
    if backend not in database_factories:
        database_factories[backend] = DatabaseFactory(backend, tmp_path_factory.mktemp(backend))
    return database_factories[backend]


@pytest.fixture
def database_url(
    database_factory: DatabaseFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """An empty, migrated database, also made the configured one (for the CLI and the
    app): the test process's own, emptied again after the test."""
    url = database_factory.own_url()
    monkeypatch.setenv("STEPLABEL_DATABASE_URL", url)
    from app.core.config import get_settings

    get_settings.cache_clear()
    yield url
    from app.core import db

    db.dispose_engines()
    # The runtime settings are cached by database URL, which the next test shares.
    project_settings.forget_cached()
    database_factory.clear_own()


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    from app.core import db

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


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session", autouse=True)
def _grading_pool_stopped() -> Iterator[None]:
    """Stop the grading pool a test started (app/grading.py) when the session ends, rather
    than leave its forkserver and workers to the interpreter's exit."""
    yield
    from app import grading

    grading.shutdown_pool()


@pytest.fixture(autouse=True)
def _fresh_settings() -> Iterator[None]:
    from app.core.config import get_settings

    get_settings.cache_clear()
    yield
    get_settings.cache_clear()
