"""Apply the Alembic migrations from code, and check that a database is up to date."""

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from app.core.db import make_engine

ALEMBIC_INI = Path(__file__).resolve().parents[2] / "alembic.ini"


class SchemaOutOfDate(RuntimeError):
    """The database has not been migrated to the code's schema."""


def _config() -> Config:
    config = Config(str(ALEMBIC_INI))
    config.attributes["configure_logger"] = False
    return config


def _run(url: str, action: str, revision: str) -> None:
    # A private engine, disposed at the end, so SQLite's WAL is checkpointed into the file.
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            config = _config()
            config.attributes["connection"] = connection
            getattr(command, action)(config, revision)
    finally:
        engine.dispose()


def upgrade(url: str, revision: str = "head") -> None:
    _run(url, "upgrade", revision)


def downgrade(url: str, revision: str = "base") -> None:
    _run(url, "downgrade", revision)


def head_revision() -> str | None:
    """The newest migration: the schema the code needs."""
    return ScriptDirectory.from_config(_config()).get_current_head()


def check_current(engine: Engine) -> None:
    """Raise SchemaOutOfDate unless the database is at the newest migration."""
    head = head_revision()
    missing = _missing_sqlite_file(engine)
    if missing is not None:
        # Connecting would create it: a mistyped path would leave an empty file behind.
        raise SchemaOutOfDate(
            f"there is no database file {missing}: run `steplabel migrate` (make migrate) "
            "to make one, or check STEPLABEL_DATABASE_URL"
        )
    with engine.connect() as connection:
        current = MigrationContext.configure(connection).get_current_revision()
    if current != head:
        state = "has no steplabel schema" if current is None else f"is at revision {current}"
        raise SchemaOutOfDate(
            f"the database {state}, the code needs {head}: run `steplabel migrate` (make migrate)"
        )


def _missing_sqlite_file(engine: Engine) -> Path | None:
    """The SQLite file the engine names when its folder exists and it does not (None:
    it exists, the folder does not, or the database is no file)."""
    url = engine.url
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    if url.query.get("uri") == "true":  # a URI such as file:name?mode=memory
        return None
    path = Path(url.database)
    # No folder: connecting fails without making anything, and says so itself.
    return path if path.parent.is_dir() and not path.exists() else None
