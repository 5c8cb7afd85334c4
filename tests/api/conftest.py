"""Helpers for the token API's tests: committed users and tokens, an app client."""

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.auth import tokens
from app.main import create_app
from app.models import Role, TokenScope, User
from tests.factories import make_user


@dataclass(frozen=True)
class Issued:
    token_id: int
    secret: str
    user_id: int

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secret}"}


def issue(engine: Engine, user_name: str, scopes: str, role: Role = Role.ADMIN) -> Issued:
    """A committed user (made if missing) and a new token of ``scopes`` for them. A
    labeler's token is made while the user is an admin, then the user becomes a labeler:
    no token is made for a labeler (tokens.ADMIN_ONLY_SCOPES)."""
    with Session(engine) as session:
        user = session.query(User).filter_by(name=user_name).one_or_none()
        user = user or make_user(session, user_name, role=Role.ADMIN)
        token, secret = tokens.create_token(session, user, "test", tokens.parse_scopes(scopes))
        user.role = role.value
        session.commit()
        return Issued(token.id, secret, user.id)


@pytest.fixture
def api(engine: Engine) -> Iterator[TestClient]:
    with TestClient(create_app()) as client:
        yield client


def wait_for_job(api: TestClient, url: str, headers: dict[str, str]) -> dict[str, Any]:
    """Poll a pushed batch's job until it has finished; its last state."""
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline:
        job: dict[str, Any] = api.get(url, headers=headers).json()
        if job["status"] in ("succeeded", "failed"):
            return job
        time.sleep(0.05)  # the job runs in the app's import thread: nothing to wait on
    raise AssertionError(f"{url} did not finish in {JOB_TIMEOUT_S} s")


JOB_TIMEOUT_S = 60.0
ALL_SCOPES = ",".join(scope.value for scope in TokenScope)
