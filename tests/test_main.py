import gc

from fastapi.testclient import TestClient
from sqlalchemy import Engine

from app.main import create_app


def test_a_running_app_keeps_its_start_out_of_full_collections(engine: Engine) -> None:
    assert gc.get_freeze_count() == 0
    with TestClient(create_app()) as client:
        assert client.get("/healthz").status_code == 200
        # Modules, routes and settings: far more than any one request makes.
        assert gc.get_freeze_count() > 50_000
    assert gc.get_freeze_count() == 0
