"""The command line when the database fails in the middle of a command (Postgres): one line
naming the failure and exit status 75 (``DATABASE_FAILED``), nothing half-written: an import
keeps nothing, an export leaves its file as it was, a pushed batch's job says to push again.

Each command is stopped at a known point, as a restart would stop it: the test holds a lock
on a table the command needs, waits until the command waits for it, and ends the command's
connection."""

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from app.auth import tokens
from app.cli_common import DATABASE_FAILED
from app.core.db import make_engine
from app.models import Problem, Role, Solution, TokenScope
from tests.browser.live import ROOT, running_server
from tests.conftest import DatabaseFactory, _admin_execute
from tests.factories import make_rated_label, make_solution, make_user

WAIT_S = 60.0
"""How long a command may take to reach the lock (its imports, on a loaded machine)."""


@pytest.fixture
def url(database_factory: DatabaseFactory) -> str:
    if database_factory.backend != "postgres":
        pytest.skip("a database server whose connections can be ended")
    return database_factory.new_url()


def steplabel(url: str, *args: str) -> subprocess.Popen[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("STEPLABEL_")}
    env |= {"STEPLABEL_DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", "from app.cli import main; main()", *args]
    return subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@contextmanager
def locked(engine: Engine, table: str) -> Iterator[None]:
    """``table`` locked against every reader and writer while the block runs."""
    with engine.connect() as connection, connection.begin():
        connection.execute(text(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
        yield


def end_the_waiting_connection(url: str, process: subprocess.Popen[str]) -> None:
    """Once a connection to the database of ``url`` waits for a lock, end it."""
    name = make_url(url).database
    waiting = (
        f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{name}'"
        " AND wait_event_type = 'Lock'"
    )
    deadline = time.monotonic() + WAIT_S
    with make_engine(url).connect() as watcher:
        while not watcher.execute(text(waiting)).scalar():
            watcher.rollback()  # a transaction sees one snapshot of the activity
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the command never waited for the lock"
            time.sleep(0.05)
    _admin_execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        f" WHERE datname = '{name}' AND wait_event_type = 'Lock'"
    )


def test_an_import_the_database_fails_under_keeps_nothing_and_says_so(
    url: str, tmp_path: Path
) -> None:
    source = tmp_path / "solutions.jsonl"
    line = {"problem": "What is $1 + 1$?", "steps": ["$1 + 1 = 2$.", "# Answer\n\n2"]}
    source.write_text(json.dumps(line) + "\n")
    engine = make_engine(url)
    with locked(engine, "problems"):
        command = steplabel(url, "import", "solutions", str(source))
        end_the_waiting_connection(url, command)
    _, stderr = command.communicate(timeout=WAIT_S)
    assert command.returncode == DATABASE_FAILED, stderr
    assert stderr.splitlines() == [
        f"the database {make_url(url).render_as_string()} failed: "
        "terminating connection due to administrator command",
        "nothing was imported: run the import again once the database answers",
    ]
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(Problem)) == 0
    engine.dispose()


def test_an_export_the_database_fails_under_leaves_its_file_as_it_was(
    url: str, tmp_path: Path
) -> None:
    engine = make_engine(url)
    with Session(engine) as session:
        make_rated_label(session, make_user(session, "alice"), make_solution(session), [1, 1])
        session.commit()
    out = tmp_path / "labels.jsonl"
    out.write_text("yesterday's export\n")
    with locked(engine, "labels"):
        command = steplabel(url, "export", "-o", str(out))
        end_the_waiting_connection(url, command)
    _, stderr = command.communicate(timeout=WAIT_S)
    assert command.returncode == DATABASE_FAILED, stderr
    assert stderr.splitlines()[-1] == f"the export stopped; {out} is as it was"
    assert out.read_text() == "yesterday's export\n"
    assert sorted(tmp_path.iterdir()) == [out]  # no partial file left
    engine.dispose()


def test_a_push_whose_job_the_database_failed_says_to_push_again(url: str, tmp_path: Path) -> None:
    engine = make_engine(url)
    with Session(engine) as session:
        admin = make_user(session, "root", role=Role.ADMIN)
        _, secret = tokens.create_token(session, admin, "pipeline", frozenset(TokenScope))
        session.commit()
    source = tmp_path / "solutions.jsonl"
    source.write_text(json.dumps({"problem": "What is $2$?", "steps": ["# Answer\n\n2"]}) + "\n")
    (tmp_path / "server").mkdir()
    with running_server(url, tmp_path / "server") as server:
        with locked(engine, "problems"):
            command = steplabel(
                url, "remote", "push", str(source), "--url", server, "--token", secret
            )
            end_the_waiting_connection(url, command)
        _, stderr = command.communicate(timeout=WAIT_S)
    assert command.returncode == 1, stderr
    lines = stderr.splitlines()
    assert lines[-2] == (
        f"{source}: the import stopped: the database failed: terminating connection due to"
        " administrator command; nothing was imported"
    )
    assert lines[-1] == f"{source}: the failed batch imported nothing; push the file again"
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(Solution)) == 0
    engine.dispose()
