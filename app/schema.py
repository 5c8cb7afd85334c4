"""Apply the Alembic migrations from code (the CLI and the tests)."""

from pathlib import Path

from alembic import command
from alembic.config import Config

from app.db import make_engine

ALEMBIC_INI = Path(__file__).resolve().parent.parent / "alembic.ini"


def _run(url: str, action: str, revision: str) -> None:
    # A private engine, disposed at the end, so SQLite's WAL is checkpointed into the file.
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            config = Config(str(ALEMBIC_INI))
            config.attributes["connection"] = connection
            config.attributes["configure_logger"] = False
            getattr(command, action)(config, revision)
    finally:
        engine.dispose()


def upgrade(url: str, revision: str = "head") -> None:
    _run(url, "upgrade", revision)


def downgrade(url: str, revision: str = "base") -> None:
    _run(url, "downgrade", revision)
