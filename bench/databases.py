"""Throwaway Postgres databases for the benchmarks."""

import secrets
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url


@contextmanager
def fresh_postgres_database(postgres_url: str, prefix: str, keep: bool = False) -> Iterator[str]:
    """The URL of a new, empty database on ``postgres_url``'s server, dropped afterwards
    unless ``keep``."""
    name = f"{prefix}_{secrets.token_hex(4)}"
    server = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with server.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    finally:
        if keep:
            print(f"kept database {name}")
        else:
            with server.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        server.dispose()
