"""Training runs as rows: the schedule, claiming, stale workers, one run at a time."""

import itertools
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.models import Label, RunStatus, TrainingRun
from app.training import request_run
from tests.factories import make_solution, make_user
from worker import runs

NOW = datetime(2026, 11, 22, 12, 0, 0)


def settings(**values: object) -> Settings:
    return Settings(**{"train_every_minutes": 0, "train_min_new_labels": 2, **values})  # type: ignore[arg-type]


_labelers = itertools.count()


def add_labels(session: Session, count: int, at: datetime = NOW) -> None:
    labeler = make_user(session, f"labeler-{next(_labelers)}")
    for index in range(count):
        solution = make_solution(session)
        session.add(
            Label(
                dedupe_key=f"label-{solution.id}-{index}",
                labeler_id=labeler.id,
                problem_id=solution.problem_id,
                solution_id=solution.id,
                timestamp=at,
                finish_reason="solution",
                created_at=at,
            )
        )
    session.flush()


def test_nothing_is_due_without_new_labels(session: Session) -> None:
    assert runs.claim_run(session, settings(), now=NOW) is None
    assert runs.claim_run(session, settings(train_every_minutes=1), now=NOW) is None


def test_enough_new_labels_start_a_run(session: Session) -> None:
    add_labels(session, 1)
    assert runs.claim_run(session, settings(), now=NOW) is None
    add_labels(session, 1)
    run = runs.claim_run(session, settings(), now=NOW)
    assert run is not None and run.status == RunStatus.RUNNING.value
    assert run.started_at == NOW and run.worker == runs.worker_name()


def test_the_timer_starts_a_run_once_labels_exist(session: Session) -> None:
    add_labels(session, 1)
    timer = settings(train_every_minutes=30, train_min_new_labels=0)
    first = runs.claim_run(session, timer, now=NOW)
    assert first is not None
    runs.finish_run(session, first)
    add_labels(session, 1, at=NOW + timedelta(minutes=1))
    assert runs.claim_run(session, timer, now=NOW + timedelta(minutes=10)) is None
    assert runs.claim_run(session, timer, now=NOW + timedelta(minutes=31)) is not None


def test_failed_runs_back_the_schedule_off_but_not_a_request(session: Session) -> None:
    """A failure that comes back every time failed a run at every poll, each loading its
    model: the schedule waits 1, 2, 4 ... minutes after each failure in a row."""
    add_labels(session, 2)
    now = NOW
    for failures in (1, 2, 3):
        run = runs.claim_run(session, settings(), now=now)
        assert run is not None, failures
        runs.finish_run(session, run, error="no space left on device")
        run.finished_at = now
        wait = runs.failure_backoff(failures)
        assert wait == timedelta(minutes=2 ** (failures - 1))
        assert runs.claim_run(session, settings(), now=now + wait / 2) is None
        now += wait
    request_run(session)
    assert runs.claim_run(session, settings(), now=now + timedelta(seconds=1)) is not None
    assert runs.failure_backoff(20) == runs.FAILURE_BACKOFF_MAX


def test_a_requested_run_is_claimed_even_without_labels(session: Session) -> None:
    requested = request_run(session)
    assert request_run(session).id == requested.id  # one waiting request at a time
    run = runs.claim_run(session, settings(), now=NOW)
    assert run is not None and run.id == requested.id


def test_one_run_at_a_time_and_stale_runs_fail(session: Session) -> None:
    first = runs.claim_run(session, settings(), force=True, now=NOW)
    assert first is not None and first.requested_at == first.started_at == NOW
    request_run(session)
    assert runs.claim_run(session, settings(), force=True, now=NOW + timedelta(minutes=1)) is None
    assert runs.whose_run_blocks(session, NOW + timedelta(seconds=75)) == (
        f"run {first.id} is training on {runs.worker_name()} (last heartbeat 75 s ago; "
        "a run is taken for dead after 10 min without one)"
    )
    later = NOW + runs.STALE_AFTER + timedelta(minutes=1)
    second = runs.claim_run(session, settings(), now=later)
    session.refresh(first)
    assert first.status == RunStatus.FAILED.value and first.error == "the worker stopped"
    assert second is not None and second.id != first.id
    runs.finish_run(session, second)
    assert runs.whose_run_blocks(session) == "another worker was training"


def test_failed_runs_do_not_reset_the_schedule(session: Session) -> None:
    add_labels(session, 2)
    run = runs.claim_run(session, settings(), now=NOW)
    assert run is not None
    runs.finish_run(session, run, error="boom")
    run.finished_at = NOW
    # Due again once the backoff has passed: the failure is not the last success.
    retry = runs.claim_run(session, settings(), now=NOW + runs.failure_backoff(1))
    assert retry is not None and retry.id != run.id
    statuses = session.scalars(select(TrainingRun.status).order_by(TrainingRun.id)).all()
    assert statuses == [RunStatus.FAILED.value, RunStatus.RUNNING.value]


def test_a_failure_reported_beside_the_worker_ends_only_a_running_run(session: Session) -> None:
    running = runs.claim_run(session, settings(), force=True, now=NOW)
    assert running is not None
    runs.fail_if_running(session, running.id, "rank 1: out of memory")
    session.refresh(running)
    assert running.status == RunStatus.FAILED.value and running.error == "rank 1: out of memory"
    assert running.finished_at is not None

    finished = runs.claim_run(session, settings(), force=True, now=NOW)
    assert finished is not None
    runs.finish_run(session, finished)
    runs.fail_if_running(session, finished.id, "rank 1: too late")
    session.refresh(finished)
    assert finished.status == RunStatus.SUCCEEDED.value and finished.error is None
