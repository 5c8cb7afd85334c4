"""A database outage for tests, on Postgres: the test database refuses new connections and
its open ones are ended (pg_terminate_backend), as in a restart or a failover, until the
block ends. Only the test's own database is touched, never the server other tests share."""

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.engine import make_url

from tests.conftest import _admin_execute


def block_database(url: str) -> None:
    """Refuse new connections to the database of ``url`` and end the open ones."""
    name = make_url(url).database
    assert name and name.startswith("steplabel_"), f"not a test database: {name!r}"
    _admin_execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
    _admin_execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        f" WHERE datname = '{name}' AND pid <> pg_backend_pid()"
    )


def unblock_database(url: str) -> None:
    _admin_execute(f'ALTER DATABASE "{make_url(url).database}" ALLOW_CONNECTIONS true')


@contextmanager
def database_away(url: str) -> Iterator[None]:
    """The database of ``url`` unreachable while the block runs."""
    block_database(url)
    try:
        yield
    finally:
        unblock_database(url)
