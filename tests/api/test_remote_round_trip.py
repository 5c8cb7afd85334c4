"""The client's commands as a team runs them, against a running server on each backend:
``steplabel tokens create``, ``remote push`` (1,000 solutions twice: 1,000 stored; a bad
line: exit 1 with FILE:LINE), ``remote pull`` with cursors while labels are being written
(every label exactly once), the same bytes as ``steplabel export``, and ``--consensus``."""

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from app.models import Role, Solution
from tests.api.test_pull_cursor import _setup, _write_label
from tests.browser.live import ROOT, running_server
from tests.factories import make_user

SOLUTIONS = 1000
OVERLAPPING_PULLS = 3


@pytest.fixture
def server(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_server(database_url, tmp_path_factory.mktemp("server")) as url:
        yield url


def steplabel(*args: str, database_url: str) -> subprocess.CompletedProcess[str]:
    """The command line as a shell runs it, in a process of its own."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("STEPLABEL_")}
    env |= {"STEPLABEL_DATABASE_URL": database_url, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", "from app.cli import main; main()", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def _token(engine: Engine, database_url: str) -> str:
    with Session(engine) as session:
        make_user(session, "root", role=Role.ADMIN)
        session.commit()
    created = steplabel(
        "tokens", "create", "pipeline", "--scopes", "import,export", database_url=database_url
    )
    assert created.returncode == 0, created.stderr
    token = created.stdout.splitlines()[-1]
    assert token.startswith("slt_") and " " not in token
    return token


def test_push_twice_stores_each_solution_once(
    server: str, engine: Engine, database_url: str, tmp_path: Path
) -> None:
    token = _token(engine, database_url)
    generated = tmp_path / "generated.jsonl"
    generated.write_text(
        "".join(
            json.dumps(
                {
                    "problem": f"What is ${n} \\times 3$?",
                    "steps": [f"${n} \\times 3 = {3 * n}$.", f"# Answer\n\n{3 * n}"],
                    "external_id": f"gen-{n}",
                }
            )
            + "\n"
            for n in range(SOLUTIONS)
        )
    )
    remote = ("--url", server, "--token", token)
    for _ in range(2):
        pushed = steplabel(
            "remote",
            "push",
            str(generated),
            "--batch-lines",
            "300",
            *remote,
            database_url=database_url,
        )
        assert pushed.returncode == 0, pushed.stderr
    assert "0 solutions added, 100 already present" in pushed.stdout
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(Solution)) == SOLUTIONS
        assert (
            session.scalar(select(Solution.source_id).where(Solution.source_id == "gen-999"))
            == "gen-999"
        )
    bad = tmp_path / "bad.jsonl"
    bad.write_text(generated.read_text().splitlines()[0] + '\n\n{"problem": "x"}\n')
    refused = steplabel("remote", "push", str(bad), *remote, database_url=database_url)
    assert refused.returncode == 1
    assert f"{bad}:3: " in refused.stderr
    assert "give exactly one of 'steps'" in refused.stderr


def test_pulls_while_labels_are_written_get_each_once_as_export_writes_them(
    server: str, engine: Engine, database_url: str, tmp_path: Path
) -> None:
    token = _token(engine, database_url)
    remote = ("--url", server, "--token", token)
    labeler_id, solution_id = _setup(engine)
    stop = threading.Event()
    written: list[int] = []
    failures: list[BaseException] = []

    def write() -> None:
        # Writes until told to stop: a pull (a process of its own) takes seconds.
        try:
            while not stop.is_set():
                with Session(engine) as session:
                    _write_label(session, labeler_id, solution_id, len(written))
                    session.commit()
                written.append(len(written))
                time.sleep(0.01)
        except BaseException as error:  # reported below
            failures.append(error)

    writer = threading.Thread(target=write)
    writer.start()
    marks: list[int] = []
    cursor: list[str] = []
    try:
        for pull in range(OVERLAPPING_PULLS):
            out = tmp_path / f"pull-{pull}.jsonl"
            pulled = steplabel(
                "remote", "pull", str(out), *remote, *cursor, database_url=database_url
            )
            assert pulled.returncode == 0, pulled.stderr
            cursor = ["--since", pulled.stdout.splitlines()[-1]]
            marks += [json.loads(x)["label"]["total_time"] for x in out.read_text().splitlines()]
    finally:
        stop.set()
        writer.join()
    assert not failures, failures
    # The horizon is the server's: a transaction another test process holds open (in any
    # database) delays the last labels, never loses them. Pull until they came.
    deadline = time.monotonic() + 60
    while len(marks) < len(written) and time.monotonic() < deadline:
        last = tmp_path / "last.jsonl"
        pulled = steplabel("remote", "pull", str(last), *remote, *cursor, database_url=database_url)
        assert pulled.returncode == 0, pulled.stderr
        cursor = ["--since", pulled.stdout.splitlines()[-1]]
        marks += [json.loads(x)["label"]["total_time"] for x in last.read_text().splitlines()]
        time.sleep(0.2)
    assert len(written) > OVERLAPPING_PULLS
    assert sorted(marks) == written  # every label, none twice

    everything = tmp_path / "everything.jsonl"
    pulled = steplabel("remote", "pull", str(everything), *remote, database_url=database_url)
    exported = tmp_path / "exported.jsonl"
    export = steplabel("export", "-o", str(exported), database_url=database_url)
    assert export.returncode == 0, export.stderr
    assert everything.read_bytes() == exported.read_bytes()
    assert len(everything.read_bytes().splitlines()) == len(written)

    consensus = steplabel(
        "remote",
        "pull",
        str(tmp_path / "c.jsonl"),
        *remote,
        "--consensus",
        database_url=database_url,
    )
    assert consensus.returncode == 0, consensus.stderr
    exported = tmp_path / "exported-consensus.jsonl"
    export = steplabel("export", "--consensus", "-o", str(exported), database_url=database_url)
    assert export.returncode == 0, export.stderr
    assert (tmp_path / "c.jsonl").read_bytes() == exported.read_bytes()
    since = ["--since", consensus.stdout.splitlines()[-1]]
    refused = steplabel(
        "remote",
        "pull",
        str(tmp_path / "c2.jsonl"),
        *remote,
        "--consensus",
        *since,
        database_url=database_url,
    )
    assert refused.returncode != 0
    assert "whole consensus as of now" in refused.stderr
