"""schemathesis against every operation of the app's OpenAPI schema, as a visitor, a labeler
and an admin: whatever a client sends, the answer is never a 5xx.

The requests go to the app in process (schemathesis's ASGI transport), each carrying the
actor's session cookie and CSRF token from the real login flow, so that the generated
inputs reach the routes' code and not only the login and CSRF checks. The schema comes from
``app.openapi()``, whether or not the app serves it. Generation is derandomized: a run
sends the same requests each time, so a failure is never a fluke of the seed.

SQLite takes the full run; Postgres, whose INTEGER columns stop at 2**31 - 1, a shorter one.
Beside them go the inputs the generator cannot make: a CSRF token that is not ASCII, and an
upload whose file name is longer than its job keeps.
"""

import re
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import Case, GenerationMode
from schemathesis.python import asgi
from schemathesis.schemas import APIOperation
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.auth import tokens, users
from app.core.csrf import CSRF_FIELD, CSRF_HEADER
from app.main import create_app
from app.models import Role
from tests.conftest import DatabaseFactory
from tests.factories import PASSWORD, make_label, make_solution, make_user
from tests.web import csrf_from

ROLES = (None, Role.LABELER, Role.ADMIN)
"""Who sends the requests: a visitor who is not logged in, a labeler, an admin; and beside
them a pipeline holding an admin's API token (``TOKEN_HOLDER``)."""
TOKEN_HOLDER = "pipeline"
"""The admin whose token the token-holding actor sends: it pushes and pulls through
/api/v1 amid the others' requests, with no cookie."""
EXAMPLES = {
    "sqlite": {GenerationMode.POSITIVE: 42, GenerationMode.NEGATIVE: 16},
    "postgres": {GenerationMode.POSITIVE: 10, GenerationMode.NEGATIVE: 5},
}
"""Requests per operation, role and mode, at most: an operation without parameters has
one request to make, and one whose parameters are all strings none that breaks its schema."""
PARTS = 2
"""The operations are shared out among this many tests, which the test processes run side
by side."""
MINIMUM_REQUESTS = {"sqlite": 2_500, "postgres": 500}
"""Per part: SQLite's run sends at least 5,000 requests in all, Postgres's 1,000."""


@dataclass
class Actor:
    """A browser, logged in or not: the cookies and CSRF header its requests carry."""

    app: FastAPI
    engine: Engine
    role: Role | None
    cookies: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    logins: int = 0
    client: asgi.ASGIClient | None = None
    """What sends the fuzzer's requests (``actors``); without one, schemathesis makes a
    client per request."""

    holds_token: bool = False
    """A pipeline with an API token (``TOKEN_HOLDER``'s, every scope), not a browser."""
    login_version: int = 0
    """The user's session version when the actor logged in: their login stands while the
    user is active and the version unchanged (app/auth/sessions.py)."""
    secret: str = ""
    """The token holder's token."""

    @property
    def name(self) -> str:
        if self.holds_token:
            return TOKEN_HOLDER
        return self.role.value if self.role else "visitor"

    def log_in(self) -> None:
        """Through the login form, as a browser does; each time from another address, so
        that the fuzzer's failed logins never throttle the actor's own. A token holder
        gets a new token instead."""
        if self.holds_token:
            self._new_token()
            return
        self.logins += 1
        client = TestClient(self.app, client=(f"127.0.1.{self.logins % 250}", 50000))
        token = csrf_from(client.get("/login").text)
        if self.role is not None:
            form = {"name": self.name, "password": PASSWORD, "csrf_token": token}
            response = client.post("/login", data=form, follow_redirects=False)
            assert response.status_code == 303, response.text
            token = csrf_from(client.get("/me").text)
            with Session(self.engine) as session:
                self.login_version = users.user_by_name(session, self.name).session_version
        self.cookies = dict(client.cookies.items())
        self.headers = {"X-CSRF-Token": token}

    def keep_logged_in(self) -> None:
        """Log in again if the fuzzer ended the actor's session: as an admin it may log
        out, deactivate either actor, reset their passwords or end their sessions.

        Whether the login stands is read from the database as the app reads it, not asked
        over HTTP: a request per actor after every change was a fifth of the run."""
        if self.role is None:
            return
        with Session(self.engine) as session:
            if self._logged_in(session):
                return
            users.reactivate(session, self.name)
            users.reset_password(session, self.name, PASSWORD)
            session.commit()
        self.log_in()

    def answered_as_logged_in(self) -> bool:
        """Whether the app takes the actor's login: what ``keep_logged_in`` read from the
        database, asked over HTTP."""
        me = TestClient(self.app, cookies=self.cookies).get(
            "/api/v1/me" if self.holds_token else "/me",
            headers=self.headers,
            follow_redirects=False,
        )
        return me.status_code == 200

    def _logged_in(self, session: Session) -> bool:
        if self.holds_token:
            return tokens.token_holder(session, self.secret) is not None
        user = users.user_by_name(session, self.name)
        return user.is_active and user.session_version == self.login_version

    def _new_token(self) -> None:
        """A token of every scope for ``TOKEN_HOLDER`` (the fuzzer, as an admin, may revoke
        it or deactivate its user), sent as a pipeline sends it: a bearer header alone."""
        with Session(self.engine) as session:
            holder = users.user_by_name(session, TOKEN_HOLDER)
            _token, secret = tokens.create_token(
                session, holder, "fuzz", tokens.parse_scopes("import,export,read")
            )
            session.commit()
        self.cookies = {}
        self.secret = secret
        self.headers = {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def actors(app: FastAPI, engine: Engine) -> Iterator[list[Actor]]:
    """Every actor, logged in, each with a client of its own for all its requests.

    schemathesis's own client per request read the proxy settings from the environment
    each time, a tenth of the requests' time (BENCHMARKS); these do not (the app is in
    process). Each is entered, which starts the app's lifespan as schemathesis's client
    does; the cookies a response sets are cleared after each request (``_send``), so each
    request carries the actor's alone, as before."""
    actors = [Actor(app, engine, role) for role in ROLES]
    actors.append(Actor(app, engine, Role.ADMIN, holds_token=True))
    with ExitStack() as clients:
        for actor in actors:
            actor.client = clients.enter_context(asgi.get_client(app))
            actor.client.trust_env = False
            actor.log_in()
        yield actors


@dataclass
class Tally:
    statuses: Counter[int] = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())

    def add(self, case: Case, actor: Actor, status: int, detail: str) -> None:
        self.statuses[status] += 1
        if status >= 500:
            curl = case.as_curl_command(headers=actor.headers)
            self.server_errors.append(f"{actor.name}: {status} {detail} for {curl}")


@pytest.fixture
def app(engine: Engine) -> Iterator[FastAPI]:
    """The app over a database with a labeler, an admin, queued solutions and a label."""
    with Session(engine) as session:
        labeler = make_user(session, Role.LABELER.value)
        make_user(session, Role.ADMIN.value, role=Role.ADMIN)
        make_user(session, TOKEN_HOLDER, role=Role.ADMIN)
        solutions = [make_solution(session) for _ in range(5)]
        make_label(session, labeler, solutions[0], [[1], [0]])
        session.commit()
    yield create_app()
    # schemathesis started the app's lifespan on its first request and keeps it running.
    asgi.shutdown_lifespans()


def _operations(app: FastAPI) -> list[APIOperation]:
    schema = schemathesis.openapi.from_dict(app.openapi())
    schema.app = app
    return [result.ok() for result in schema.get_all_operations()]


def _send(case: Case, actor: Actor) -> tuple[int, str]:
    """The response's status, or 500 and the exception that escaped the app."""
    try:
        call = case.call(session=actor.client, headers=actor.headers, cookies=actor.cookies)
        return call.status_code, ""
    except Exception as error:  # what escapes the app, a server answers with a 500
        return 500, f"{type(error).__name__}: {error}"[:300]
    finally:
        if actor.client is not None:
            actor.client.cookies.clear()


def _fuzz(
    operation: APIOperation,
    actors: list[Actor],
    mode: GenerationMode,
    examples: int,
    tally: Tally,
) -> None:
    """Each generated request goes to every actor: generating takes longer than sending."""

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def send(case: Case) -> None:
        changed_by = []
        for actor in actors:
            status, detail = _send(case, actor)
            tally.add(case, actor, status, detail)
            if case.method != "GET" and status < 400:
                changed_by.append(actor)
        # An admin's request may have ended any actor's session, or revoked the token; any
        # other actor's only its own (logging out): only those are checked, each over HTTP.
        if any(actor.role is Role.ADMIN for actor in changed_by):
            changed_by = actors
        for actor in changed_by:
            actor.keep_logged_in()

    try:
        send()
    except Unsatisfiable:
        # Nothing breaks this operation's schema: it has no parameters, or only strings.
        assert mode is GenerationMode.NEGATIVE, f"{operation.label}: nothing generated"


@pytest.mark.parametrize("part", range(PARTS))
def test_no_generated_request_gets_a_server_error(
    app: FastAPI, actors: list[Actor], database_factory: DatabaseFactory, part: int
) -> None:
    backend = database_factory.backend
    total = Tally()
    started = time.perf_counter()
    for operation in _operations(app)[part::PARTS]:
        for mode, examples in EXAMPLES[backend].items():
            _fuzz(operation, actors, mode, examples, total)
        for actor in actors:
            actor.keep_logged_in()
            assert actor.role is None or actor.answered_as_logged_in(), (
                f"{actor.name}: logged in by the database, refused by the app"
            )
    elapsed = time.perf_counter() - started
    print(f"{backend}, part {part}: {total.requests} requests in {elapsed:.0f} s")
    print(dict(total.statuses))
    assert not total.server_errors, "\n".join(total.server_errors)
    assert total.requests >= MINIMUM_REQUESTS[backend]


NOT_ASCII = "é"
LONG_FILE_NAME = "x" * 300 + ".jsonl"


def test_no_token_or_file_name_the_generator_cannot_make_gets_a_server_error(
    app: FastAPI, engine: Engine
) -> None:
    # The token is the actor's, not the schema's, and a generated upload's file name is
    # schemathesis's own: both are sent here, to every operation that changes state.
    server_errors = []
    admins_upload = None
    for actor in [Actor(app, engine, role) for role in ROLES]:
        actor.log_in()
        client = TestClient(app, cookies=actor.cookies, raise_server_exceptions=False)
        for operation in _operations(app):
            if operation.method.upper() == "GET":
                continue
            path = re.sub(r"\{\w+\}", "1", operation.path)
            header = client.post(path, headers={CSRF_HEADER: NOT_ASCII.encode()})
            form = client.post(path, data={CSRF_FIELD: NOT_ASCII})
            for carried_in, response in (("header", header), ("form", form)):
                if response.status_code >= 500:
                    server_errors.append(f"{actor.name}: {path}, token in the {carried_in}")
        dataset = {"file": (LONG_FILE_NAME, b'{"problem": "x"}\n')}
        upload = client.post(
            "/admin/imports", data={"kind": "problems"}, files=dataset, headers=actor.headers
        )
        if upload.status_code >= 500:
            server_errors.append(f"{actor.name}: upload of a file with a long name")
        if actor.role is Role.ADMIN:
            admins_upload = upload
    assert not server_errors, "\n".join(server_errors)
    assert admins_upload is not None and admins_upload.status_code == 422
    assert "more than the 255 a job keeps" in admins_upload.text
