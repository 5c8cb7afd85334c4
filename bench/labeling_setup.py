"""What bench/labeling_load.py runs against: a fresh database with labelers, a history of
labels and a queue of open solutions, and a uvicorn server on it."""

import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx
from sqlalchemy import Engine, insert, text

from app.auth.users import hash_password
from app.content_keys import content_key
from app.core.db import transaction
from app.datasets.importing import import_prm800k
from app.datasets.reading import read_files
from app.models import Problem, QueueState, Role, Solution, User
from bench.synthetic_prm800k import synthetic_lines

ROOT = Path(__file__).resolve().parent.parent
# Fixed, so that a rerun against the same server keeps its sessions valid.
SECRET_KEY = "steplabel-labeling-load-benchmark-secret-key"
INSERT_BATCH = 5_000


def labeler_names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{index:03d}" for index in range(count)]


def import_history(engine: Engine, labels: int, seed: int) -> None:
    """Labels from earlier in the project, imported as PRM800K lines.

    A project under load has labels already, and Postgres plans for the tables it has: on
    empty label tables it would plan the foreign-key checks of the first inserts as scans,
    and keep those plans while the tables grow (until autovacuum analyzes them, up to a
    minute into the run). Labels made in the app come with their finished assignments,
    imported ones without: those are added too, or the queue's queries would be planned
    for an empty assignments table.
    """
    if not labels:
        return
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "history.jsonl"
        with path.open("w") as out:
            for line in synthetic_lines(labels, seed):
                out.write(line + "\n")
        with transaction(engine) as session:
            import_prm800k(session, read_files([path]))
    with engine.begin() as connection:
        connection.execute(HISTORY_ASSIGNMENTS)


HISTORY_ASSIGNMENTS = text(
    """
    INSERT INTO assignments
        (solution_id, labeler_id, slot, leased_at, expires_at, completed_at, label_id)
    SELECT solution_id, labeler_id,
           row_number() OVER (PARTITION BY solution_id ORDER BY id) - 1,
           timestamp, timestamp, timestamp, id
    FROM labels WHERE solution_id IS NOT NULL
    ON CONFLICT DO NOTHING
    """
)


def create_labelers(engine: Engine, names: list[str], password: str) -> None:
    """Approved labelers, inserted directly: one argon2 hash serves them all."""
    password_hash = hash_password(password)
    rows = [
        {
            "name": name,
            "role": Role.LABELER.value,
            "password_hash": password_hash,
            "is_approved": True,
        }
        for name in names
    ]
    with engine.begin() as connection:
        connection.execute(insert(User), rows)


def step_texts(rng: random.Random, number: int) -> list[str]:
    values = [rng.randrange(2, 500) for _ in range(rng.randint(5, 10))]
    return [
        f"Step {index + 1}: since $a_{{{index}}} = {value}$, we get "
        f"$a_{{{index}}}^2 + {number} = {value * value + number}$."
        for index, value in enumerate(values)
    ]


def create_queue(engine: Engine, solutions: int, rng: random.Random) -> None:
    """``solutions`` open solutions of generation 0, four per problem, 5-10 steps each."""
    run = secrets.token_hex(4)
    for first in range(0, solutions, INSERT_BATCH):
        numbers = range(first, min(first + INSERT_BATCH, solutions))
        problem_numbers = sorted({number // 4 for number in numbers})
        problems = [
            {
                "content_key": content_key("load-problem", run, number),
                "text_key": content_key("load-problem-text", run, number),
                "text": f"Problem {number}: find $x$ such that $x^2 = {number * number}$.",
                "ground_truth_answer": str(number),
            }
            for number in problem_numbers
        ]
        with engine.begin() as connection:
            ids = connection.execute(
                insert(Problem).returning(Problem.id, sort_by_parameter_order=True),
                problems,
            ).scalars()
            problem_ids = dict(zip(problem_numbers, ids, strict=True))
            rows = []
            for number in numbers:
                steps = step_texts(rng, number)
                rows.append(
                    {
                        "content_key": content_key("load-solution", run, number),
                        "problem_id": problem_ids[number // 4],
                        "steps": steps,
                        "answer": str(number),
                        "generation": 0,
                        "queue_state": QueueState.OPEN.value,
                    }
                )
            connection.execute(insert(Solution), rows)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def running_server(database_url: str, workers: int, overlap: int) -> Iterator[tuple[str, int]]:
    """uvicorn serving the app on a free loopback port; yields its URL and process id."""
    port = free_port()
    env = os.environ | {
        "STEPLABEL_DATABASE_URL": database_url,
        "STEPLABEL_SECRET_KEY": SECRET_KEY,
        "STEPLABEL_QC_RATE": "0",
        "STEPLABEL_OVERLAP": str(overlap),
    }
    command = [
        sys.executable, "-m", "uvicorn", "app.main:app", "--host", "127.0.0.1",
        "--port", str(port), "--workers", str(workers), "--no-access-log", "--log-level", "warning",
    ]  # fmt: skip
    server = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, server)
        yield url, server.pid
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def wait_healthy(url: str, server: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with status {server.returncode}")
        with suppress(httpx.HTTPError):
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{url}/healthz did not answer within {timeout:.0f} s")


def worker_pids(server_pid: int) -> list[int]:
    """The uvicorn processes that serve requests: its workers, or itself with one worker."""
    children = descendants(server_pid)
    workers = [pid for pid in children if "spawn_main" in _cmdline(pid)]
    return workers or [server_pid]


def descendants(pid: int) -> list[int]:
    found = []
    pending = [pid]
    while pending:
        parent = pending.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            with suppress(OSError):
                children = [int(child) for child in (task / "children").read_text().split()]
                found += children
                pending += children
    return found


def _cmdline(pid: int) -> str:
    with suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    return ""
