"""Every admin page and API, whoever wrote it: 403 to labelers, the login page (or 401) to
visitors who are not logged in. Routes are found in the app, so new ones are covered."""

import re
from urllib.parse import urlencode

from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from app.main import create_app
from app.models import ProjectSetting, TrainingRun, User
from tests.web import add_user, log_in


def admin_routes() -> list[tuple[str, str]]:
    """(method, path) of every admin route, from the app's OpenAPI schema, path parameters
    filled with 1."""
    return [
        (method.upper(), re.sub(r"\{[^}]+\}", "1", path))
        for path, operations in create_app().openapi()["paths"].items()
        if path.startswith(("/admin", "/api/admin"))
        for method in operations
    ]


ROUTES = admin_routes()


def test_the_dashboard_routes_are_all_found() -> None:
    paths = {path for _, path in ROUTES}
    for expected in (
        "/admin",
        "/admin/progress",
        "/admin/throughput",
        "/admin/qc",
        "/admin/users",
        "/admin/imports",
        "/admin/prm",
        "/api/admin/progress",
        "/api/admin/quality",
    ):
        assert expected in paths
    assert {method for method, _ in ROUTES} == {"GET", "POST"}


def test_a_labeler_gets_403_everywhere(app_client: TestClient, engine: Engine) -> None:
    add_user(engine, "alice")
    token = log_in(app_client, "alice")
    for method, path in ROUTES:
        response = app_client.request(
            method, path, data={"csrf_token": token}, headers={"X-CSRF-Token": token}
        )
        assert response.status_code == 403, (method, path)
        if path.startswith("/api/"):
            assert response.json() == {"detail": "This page is for admins."}
    # Nothing changed behind the refusals.
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(User)) == 1
        assert session.scalar(select(func.count()).select_from(TrainingRun)) == 0
        assert session.scalar(select(func.count()).select_from(ProjectSetting)) == 0


def test_logged_out_visitors_go_to_the_login_page(app_client: TestClient) -> None:
    for method, path in ROUTES:
        response = app_client.request(method, path, follow_redirects=False)
        if path.startswith("/api/"):
            assert response.status_code == 401, (method, path)
        elif method == "GET":
            assert response.status_code == 303, path
            assert response.headers["location"] == "/login?" + urlencode({"next": path})
        else:
            # Refused before anything runs: as a stranger, or as a form without its token.
            assert response.status_code in (303, 403), (method, path)
