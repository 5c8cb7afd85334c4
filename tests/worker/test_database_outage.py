"""The worker's loop through a database outage (Postgres): connections refused and the open
ones ended between two runs, and again in the middle of one. The loop lives on, the run
caught by the outage is recorded as failed once the database is back (never left
running), and the next run succeeds."""

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app import training
from app.core import db
from app.core.config import Settings
from app.core.db import make_engine, transaction
from app.models import RunStatus, TrainingRun
from tests.outage import block_database, database_away, unblock_database
from tests.worker.test_cycle import TEST_WORKER

OUTAGE_S = 1.5
POLL_S = 0.2
WAIT_S = 60.0


@pytest.fixture
def checker(database_url: str) -> Iterator[Engine]:
    """An engine of the test's own, for its checks (disposed after each outage)."""
    if not database_url.startswith("postgresql"):
        pytest.skip("a database server to make unreachable")
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


def runs(checker: Engine) -> list[tuple[str, str | None]]:
    checker.dispose()  # its connections may have been ended by an outage
    with Session(checker) as session:
        rows = session.execute(
            select(TrainingRun.status, TrainingRun.error).order_by(TrainingRun.id)
        )
        return [(row.status, row.error) for row in rows]


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)  # the worker runs in a thread of its own: nothing to join yet


def ended(checker: Engine, count: int) -> bool:
    """Whether there are ``count`` runs and the last has ended."""
    try:
        found = runs(checker)
    except OperationalError:  # the outage in a run is on
        return False
    return len(found) == count and found[-1][0] in ENDED


ENDED = (RunStatus.SUCCEEDED.value, RunStatus.FAILED.value)


def request(checker: Engine) -> None:
    checker.dispose()
    with transaction(checker) as session:
        training.request_run(session)


def test_the_worker_loop_lives_through_an_outage_between_runs_and_in_one(
    engine: Engine,
    database_url: str,
    checker: Engine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from worker import cycle
    from worker.__main__ import _loop
    from worker.distributed import SINGLE

    settings = Settings(
        database_url=database_url,
        checkpoint_dir=tmp_path,
        worker_poll_seconds=POLL_S,
        train_every_minutes=0,
        train_min_new_labels=0,
        **TEST_WORKER,
    )
    monkeypatch.setattr(db, "AWAY_RETRY_MAX_S", 0.5)
    stop = threading.Event()
    failures: list[BaseException] = []

    def serve() -> None:
        try:
            _loop(engine, settings, SINGLE, stop.is_set)
        except BaseException as error:  # the test fails on it below
            failures.append(error)

    loop = threading.Thread(target=serve, name="worker-loop", daemon=True)
    loop.start()
    try:
        request(checker)
        wait_for(lambda: runs(checker) == [(RunStatus.SUCCEEDED.value, None)], "the first run")

        # Between runs: the loop polls into the outage, and waits it out.
        with database_away(database_url):
            time.sleep(OUTAGE_S)
        assert loop.is_alive(), failures
        request(checker)
        wait_for(lambda: ended(checker, 2), "run 2 to end")
        assert runs(checker)[1] == (RunStatus.SUCCEEDED.value, None)

        # In a run: the database goes away as it grades; the next step cannot be recorded.
        grade = cycle.Cycle._grade

        def grade_into_an_outage(self: cycle.Cycle) -> int:
            block_database(database_url)
            threading.Timer(OUTAGE_S, unblock_database, (database_url,)).start()
            return grade(self)

        monkeypatch.setattr(cycle.Cycle, "_grade", grade_into_an_outage)
        request(checker)
        wait_for(lambda: ended(checker, 3), "run 3 to end")
        status, error = runs(checker)[2]
        assert status == RunStatus.FAILED.value
        assert error is not None and "OperationalError" in error
        monkeypatch.setattr(cycle.Cycle, "_grade", grade)

        assert loop.is_alive(), failures
        request(checker)
        wait_for(lambda: ended(checker, 4), "run 4 to end")
        assert runs(checker)[3] == (RunStatus.SUCCEEDED.value, None)
    finally:
        stop.set()
        unblock_database(database_url)
        loop.join(timeout=WAIT_S)
    assert not loop.is_alive() and not failures
