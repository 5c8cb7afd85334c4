"""Postgres goes away under labeling load (new connections refused, open ones ended, as in
a restart or a failover) and comes back: no 500, 503s only during the outage, every
acknowledged label stored, and the requests after it succeed, without restarting the app."""

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from app.core.db import RETRY_AFTER_S, make_engine
from app.models import Label
from bench.labeling_setup import create_labelers, create_queue
from tests.browser.live import running_server
from tests.conftest import DatabaseFactory
from tests.factories import PASSWORD
from tests.labelers import Labelers
from tests.outage import database_away

LABELERS = 6
BEFORE_S, OUTAGE_S, AFTER_S = 1.5, 1.5, 2.0
RECOVERY_S = 1.0
"""How long after the outage ends a request may still meet it (one that waited for a
connection through it)."""
AFTER_MAX_S = 30.0
"""How long the labelers go on after the outage at most, until one has submitted past the
recovery window: on a loaded 2-core machine a task's round trip can outlast AFTER_S."""


@pytest.fixture
def served(database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[tuple[str, str, Engine]]:
    """A server on a fresh Postgres database with labelers and a queue: its URL, the
    database's URL and an engine on it."""
    if database_factory.backend != "postgres":
        pytest.skip("a database server to make unreachable")
    url = database_factory.new_url()
    engine = make_engine(url)
    names = [f"outage-{number}" for number in range(LABELERS)]
    create_labelers(engine, names, PASSWORD)
    create_queue(engine, 2_000, random.Random(43))
    try:
        with running_server(url, tmp_path) as server:
            yield server, url, engine
    finally:
        engine.dispose()


def test_labeling_through_a_database_outage(served: tuple[str, str, Engine]) -> None:
    server, url, engine = served
    labelers = Labelers(server, [f"outage-{number}" for number in range(LABELERS)])
    labelers.start()
    try:
        time.sleep(BEFORE_S)
        began = time.monotonic()
        with database_away(url):
            time.sleep(OUTAGE_S)
        ended = time.monotonic()
        time.sleep(AFTER_S)
        while time.monotonic() < ended + AFTER_MAX_S and not _submitted_after(
            labelers, ended + RECOVERY_S
        ):
            time.sleep(0.1)
    finally:
        labelers.stop()
    assert not labelers.failures, labelers.failures
    exchanges = labelers.exchanges

    statuses = {e.status for e in exchanges}
    assert statuses <= {200, 503}, f"only 200 and 503, never a 500: {statuses}"
    away = [e for e in exchanges if e.status == 503]
    assert away, "the outage was met"
    for exchange in away:
        assert began <= exchange.answered_at and exchange.sent_at <= ended + RECOVERY_S, exchange
    fragment = next(e for e in away if e.kind == "next")
    assert "The database is briefly unavailable" in fragment.text
    assert "<html" not in fragment.text, "an htmx request gets a fragment"
    after = [e for e in exchanges if e.sent_at > ended + RECOVERY_S]
    assert any(e.kind == "submit" for e in after), "labels went on after the outage"
    assert all(e.status == 200 for e in after), "the pool recovered without a restart"
    assert sum(e.kind == "submit" and e.status == 200 for e in exchanges) > 3 * LABELERS

    engine.dispose()  # its pooled connections were ended by the outage
    with engine.connect() as connection:
        stored = set(connection.scalars(select(Label.id)))
    acknowledged = labelers.acknowledged()
    assert acknowledged <= stored, "every acknowledged label is stored"
    # A label committed as the connection died was answered 503 and sent again (200): at
    # most the last submit of each labeler can be stored and unacknowledged.
    assert len(stored - acknowledged) <= LABELERS


def test_readyz_follows_the_database(served: tuple[str, str, Engine]) -> None:
    import httpx

    server, url, _engine = served
    assert httpx.get(f"{server}/readyz").status_code == 200
    with database_away(url):
        alive = httpx.get(f"{server}/healthz")
        ready = httpx.get(f"{server}/readyz")
    assert alive.status_code == 200
    assert ready.status_code == 503 and ready.headers["retry-after"] == str(RETRY_AFTER_S)
    assert httpx.get(f"{server}/readyz").status_code == 200


def _submitted_after(labelers: Labelers, moment: float) -> bool:
    return any(e.kind == "submit" and e.sent_at > moment for e in list(labelers.exchanges))
