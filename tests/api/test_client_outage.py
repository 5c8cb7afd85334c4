"""The API client through a database restart (Postgres): the server answers the first
requests after it 503 with Retry-After, and the client sends them again, so that a pipeline's
push or pull goes on instead of failing on an outage the server has already lived through."""

import io
import threading
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from app.auth import tokens
from app.client import Client
from app.core.db import make_engine
from app.models import Role, TokenScope
from tests.browser.live import running_server
from tests.conftest import DatabaseFactory
from tests.factories import make_user
from tests.outage import block_database, unblock_database

OUTAGE_S = 1.0


def test_the_client_sends_again_what_the_server_refused_while_its_database_was_away(
    database_factory: DatabaseFactory, tmp_path: Path
) -> None:
    if database_factory.backend != "postgres":
        pytest.skip("a database server to make unreachable")
    url = database_factory.new_url()
    engine = make_engine(url)
    with Session(engine) as session:
        admin = make_user(session, "root", role=Role.ADMIN)
        _, secret = tokens.create_token(session, admin, "pipeline", frozenset(TokenScope))
        session.commit()
    engine.dispose()
    statuses: list[int] = []
    with running_server(url, tmp_path) as server, Client(server, secret) as api:
        api.http.event_hooks["response"] = [lambda response: statuses.append(response.status_code)]
        assert api.me()["name"] == "root"  # the server's pool holds a connection now
        for request in (api.me, lambda: api.pull(io.BytesIO())):
            block_database(url)
            threading.Timer(OUTAGE_S, unblock_database, [url]).start()
            request()
    # Each request after a block was refused once at least, then answered.
    assert statuses[0] == 200 and statuses[1] == 503 and statuses[-1] == 200
    assert statuses.count(200) == 3
