"""Helpers for tests that talk to the app over HTTP (Starlette's TestClient)."""

import re
import time

from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from app.admin.import_jobs import UNFINISHED
from app.models import ImportJob, Role, User
from tests.factories import PASSWORD, make_user

_CSRF_META = re.compile(r'<meta name="csrf-token" content="([^"]+)">')


def csrf_from(html: str) -> str:
    match = _CSRF_META.search(html)
    assert match, "page has no CSRF token"
    return match.group(1)


def add_user(engine: Engine, name: str, **options: object) -> User:
    """A committed user (password PASSWORD), visible to the app's own sessions."""
    with Session(engine, expire_on_commit=False) as session:
        user = make_user(session, name, **options)  # type: ignore[arg-type]
        session.commit()
        return user


def log_in(client: TestClient, name: str, password: str = PASSWORD) -> str:
    """Log in through the form, as a browser does; returns the session's CSRF token."""
    token = csrf_from(client.get("/login").text)
    response = client.post(
        "/login",
        data={"name": name, "password": password, "csrf_token": token},
        follow_redirects=False,
    )
    assert response.status_code == 303, response.text
    return csrf_from(client.get("/me").text)


def admin_client(client: TestClient, engine: Engine, name: str = "admin") -> TestClient:
    add_user(engine, name, role=Role.ADMIN)
    log_in(client, name)
    return client


def wait_for_imports(engine: Engine, timeout_s: float = 60) -> None:
    """Until no upload's import is queued or running. The import goes on in the background
    after the response; a test that ends before it would leave its locks to the emptying of
    the database (tests/conftest.py), which then waits them out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with Session(engine) as session:
            if session.scalar(select(ImportJob.id).where(ImportJob.status.in_(UNFINISHED))) is None:
                return
        time.sleep(0.02)
    raise AssertionError(f"an import was still unfinished after {timeout_s} s")
