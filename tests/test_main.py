import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.core import schema
from app.core.config import get_settings
from app.main import create_app
from app.models import QueueState, Solution
from app.project_settings import set_value
from tests.factories import make_solution

ROOT = Path(__file__).resolve().parent.parent


def test_a_running_app_keeps_its_start_out_of_full_collections(engine: Engine) -> None:
    assert gc.get_freeze_count() == 0
    with TestClient(create_app()) as client:
        assert client.get("/healthz").status_code == 200
        # Modules, routes and settings: far more than any one request makes.
        assert gc.get_freeze_count() > 50_000
    assert gc.get_freeze_count() == 0


def test_a_changed_overlap_setting_moves_the_queue_at_start(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """STEPLABEL_OVERLAP changed between two starts: the queue follows it as it follows the
    QC form's (a solution filled at the old overlap reopens at a raised one, else it and its
    generation wait forever), unless an admin set the overlap, which wins."""
    with Session(engine) as session:
        solution = make_solution(session, queue_state=QueueState.FULL)
        solution.completed_count = 1
        session.commit()
        solution_id = solution.id

    def start_with_overlap(overlap: int) -> QueueState:
        monkeypatch.setenv("STEPLABEL_OVERLAP", str(overlap))
        get_settings.cache_clear()
        with TestClient(create_app()):
            pass
        with Session(engine) as session:
            return session.get_one(Solution, solution_id).queue_state

    assert start_with_overlap(2) == QueueState.OPEN
    assert start_with_overlap(1) == QueueState.FULL
    with Session(engine) as session:
        set_value(session, "overlap", 1)  # as the QC form stores it
        session.commit()
    assert start_with_overlap(2) == QueueState.FULL


def test_the_server_refuses_an_older_schema_in_one_line(tmp_path: Path) -> None:
    """uvicorn on a database one migration behind the code: it exits at start, with one
    line saying what to run, and no traceback."""
    database = tmp_path / "old.db"
    url = f"sqlite:///{database}"
    schema.upgrade(url)
    head = ScriptDirectory.from_config(schema._config()).get_current_head()
    schema.downgrade(url, "-1")
    env = {key: value for key, value in os.environ.items() if not key.startswith("STEPLABEL_")}
    env |= {"STEPLABEL_DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "uvicorn", "app.main:app", "--port", "0"]
    server = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert server.returncode != 0
    lines = server.stderr.splitlines()
    said = [line for line in lines if "steplabel migrate" in line]
    assert len(said) == 1, server.stderr
    assert f"the code needs {head}: run `steplabel migrate`" in said[0]
    assert "Traceback" not in server.stderr


def test_the_server_refuses_a_bad_setting_in_one_line(tmp_path: Path) -> None:
    """uvicorn with a setting out of its bounds: one line naming the variable, as the
    command line and the worker say it, and no traceback."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("STEPLABEL_")}
    env |= {"STEPLABEL_QC_RATE": "2", "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "uvicorn", "app.main:app", "--port", "0"]
    server = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert server.returncode == 2
    assert server.stderr.splitlines() == [
        "invalid settings: STEPLABEL_QC_RATE: Input should be less than or equal to 1"
    ]
