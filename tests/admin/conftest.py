"""An app client, and one logged in as an admin, for the dashboard's HTTP tests."""

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from app.main import create_app
from app.models import Role
from tests.web import add_user, log_in

HTMX = {"HX-Request": "true"}


@dataclass
class Admin:
    client: TestClient
    token: str

    def post(self, url: str, data: dict[str, str] | None = None) -> httpx.Response:
        """An htmx form post, as the dashboard's forms make them."""
        headers = {**HTMX, "X-CSRF-Token": self.token}
        return self.client.post(url, data=data or {}, headers=headers)


@pytest.fixture
def app_client(engine: Engine) -> Iterator[TestClient]:
    with TestClient(create_app()) as client:
        yield client


@pytest.fixture
def admin(app_client: TestClient, engine: Engine) -> Admin:
    add_user(engine, "root", role=Role.ADMIN)
    return Admin(app_client, log_in(app_client, "root"))
