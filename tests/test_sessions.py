"""Ending sessions: logging out, a password reset and an admin's "End sessions" revoke the
cookie itself, so that a copy of it stops working too."""

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.auth.users import reset_password
from app.main import create_app
from app.models import Role
from tests.web import add_user, log_in

COOKIE = "steplabel_session"


@pytest.fixture
def app_client(engine: Engine) -> Iterator[TestClient]:
    with TestClient(create_app()) as client:
        yield client


def copy_of(client: TestClient) -> TestClient:
    """Another browser holding the same session cookie, as one that stole it would."""
    thief = TestClient(client.app)
    thief.cookies.set(COOKIE, client.cookies[COOKIE])
    return thief


def is_logged_out(client: TestClient) -> bool:
    page = client.get("/me", follow_redirects=False)
    return page.status_code == 303 and page.headers["location"].startswith("/login")


def test_a_copied_cookie_stops_working_after_logout(app_client: TestClient, engine: Engine) -> None:
    add_user(engine, "alice")
    token = log_in(app_client, "alice")
    thief = copy_of(app_client)
    assert not is_logged_out(thief)
    logout = app_client.post("/logout", data={"csrf_token": token}, follow_redirects=False)
    assert logout.status_code == 303
    assert is_logged_out(thief)
    # Logging in again works, with a fresh session.
    log_in(app_client, "alice")
    assert not is_logged_out(app_client)


def test_a_password_reset_ends_copies_of_the_cookie(app_client: TestClient, engine: Engine) -> None:
    add_user(engine, "alice")
    log_in(app_client, "alice")
    thief = copy_of(app_client)
    with Session(engine) as session:
        reset_password(session, "alice", "a new password, long enough")
        session.commit()
    assert is_logged_out(thief) and is_logged_out(app_client)


def test_an_admin_ends_a_users_sessions_from_the_users_page(
    app_client: TestClient, engine: Engine
) -> None:
    alice = add_user(engine, "alice")
    log_in(app_client, "alice")
    admin = TestClient(app_client.app)
    add_user(engine, "root", role=Role.ADMIN)
    token = log_in(admin, "root")
    button = f"/admin/users/{alice.id}/end-sessions"
    assert button in admin.get("/admin/users").text
    answer = admin.post(button, headers={"X-CSRF-Token": token, "HX-Request": "true"})
    assert answer.status_code == 200 and "logged out everywhere" in answer.text
    assert is_logged_out(app_client)
    assert not is_logged_out(admin)
    log_in(app_client, "alice")  # the password still works
