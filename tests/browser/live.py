"""The live server the browser tests drive, what they seed into its database and read back."""

import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session, selectinload

from app.models import Label, LabelStep, QueueState, Solution
from tests.factories import make_solution, make_user

ROOT = Path(__file__).resolve().parents[2]
SECRET_KEY = "steplabel-browser-tests-only-secret-key-48-chars"
START_TIMEOUT_S = 30.0
SUBMIT_PATH = re.compile(r"/api/tasks/\d+/label$")


@dataclass(frozen=True)
class Labeler:
    id: int
    name: str
    uuid: str


@dataclass
class LiveApp:
    """The running server, its database, and the labels its pages were told they made."""

    url: str
    engine: Engine
    labels_made: list[tuple[str, str]] = field(default_factory=list)
    """(labeler uuid, finish reason) of each submit the server answered with created: true."""
    login_cookies: dict[str, list[Any]] = field(default_factory=dict)
    """Per user name, the cookies of their last login through the form on this server
    (tests/browser/pages.py ``logged_in``)."""


@dataclass(frozen=True)
class SolutionSpec:
    steps: list[str]
    alternatives: list[list[str]] | None = None
    problem_text: str | None = None
    answer: str | None = None
    """The reference answer; the factory's default when None."""
    style: str = "phase2"
    reference_solution: str | None = None
    verifier_score: float | None = None


@contextmanager
def running_server(
    database_url: str,
    workdir: Path,
    module: str = "uvicorn",
    settings: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """``python -m module`` (uvicorn's command line) serving app.main on a free loopback
    port, in a subprocess; yields its URL. ``settings``: more STEPLABEL_* variables."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    # Only this test's settings: nothing from the caller's STEPLABEL_* or a .env file.
    env = {key: value for key, value in os.environ.items() if not key.startswith("STEPLABEL_")}
    env |= {
        "STEPLABEL_DATABASE_URL": database_url,
        "STEPLABEL_SECRET_KEY": SECRET_KEY,
        "STEPLABEL_QC_RATE": "0",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    env |= settings or {}
    command = [sys.executable, "-m", module, "app.main:app"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    log = workdir / "server.log"
    with log.open("wb") as output:
        server = subprocess.Popen(
            command, cwd=workdir, env=env, stdout=output, stderr=subprocess.STDOUT
        )
    try:
        _wait_until_healthy(url, server, log)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_until_healthy(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with {server.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError):
            pass
        time.sleep(0.1)  # a process starting up has nothing to wait on but polling
    raise RuntimeError(f"the server did not answer /healthz in time:\n{log.read_text()}")


def add_labeler(engine: Engine, name: str) -> Labeler:
    """A committed, approved labeler whose password is PASSWORD."""
    with Session(engine) as session:
        user = make_user(session, name)
        session.commit()
        return Labeler(id=user.id, name=user.name, uuid=user.uuid)


def queue(engine: Engine, *specs: SolutionSpec) -> list[int]:
    """Make these solutions, in this order, the only open ones; returns their ids."""
    with Session(engine) as session:
        session.execute(
            update(Solution)
            .where(Solution.queue_state == QueueState.OPEN.value)
            .values(queue_state=QueueState.NOT_QUEUED.value)
        )
        solutions = []
        for spec in specs:
            solution = make_solution(
                session, spec.steps, alternatives=spec.alternatives, problem_text=spec.problem_text
            )
            if spec.answer is not None:
                solution.answer = solution.problem.ground_truth_answer = spec.answer
            solution.problem.ground_truth_solution = spec.reference_solution
            solution.verifier_score = spec.verifier_score
            solution.style = spec.style
            solutions.append(solution)
        session.commit()
        return [solution.id for solution in solutions]


def labels_of(engine: Engine, labeler: Labeler) -> list[Label]:
    """The labeler's stored labels, oldest first, with their steps and completions loaded."""
    with Session(engine) as session:
        return list(
            session.scalars(
                select(Label)
                .where(Label.labeler_id == labeler.id)
                .order_by(Label.id)
                .options(selectinload(Label.steps).selectinload(LabelStep.completions))
            )
        )


def ratings(label: Label) -> list[list[int | None]]:
    """Each step's completion ratings: the step's own first, then its alternatives."""
    return [[c.rating for c in step.completions] for step in label.steps]
