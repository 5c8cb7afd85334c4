"""Training runs, the current checkpoint and the generations' yield, as the PRM page shows."""

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from app.admin.prm import HEADLINE_METRICS, metric_series, prm_status
from app.models import Generation, RunStatus, TrainingRun
from app.training import request_run
from tests.factories import make_label, make_solution, make_user

START = datetime(2026, 5, 1, 9)


def add_run(session: Session, status: RunStatus, **fields: object) -> TrainingRun:
    run = TrainingRun(status=status.value, requested_at=START, **fields)
    session.add(run)
    session.flush()
    return run


def test_runs_newest_first_with_their_headline_metrics(session: Session) -> None:
    metrics = {"step_accuracy": 0.8, "auroc_negative": 0.7, "label_counts": {"1": 3}, "f": "x"}
    old = add_run(
        session,
        RunStatus.SUCCEEDED,
        started_at=START,
        finished_at=START + timedelta(minutes=3, seconds=30),
        metrics=metrics,
        timings={"train": 150.0, "evaluate": 60.0},
        labels_used=120,
        checkpoint_path="checkpoints/run-1",
        is_current=True,
    )
    failed = add_run(
        session,
        RunStatus.FAILED,
        started_at=START + timedelta(hours=1),
        heartbeat_at=START + timedelta(hours=1, seconds=12),
        finished_at=START + timedelta(hours=1, seconds=12),
        error="out of memory",
        metrics={"step_accuracy": "not a number", "first_error_f1": True},
    )
    waiting = request_run(session)

    status = prm_status(session)
    assert [run.id for run in status.runs] == [waiting.id, failed.id, old.id]
    summary = status.runs[2]
    # Only the headline metrics, and only numbers, reach the page.
    assert summary.metrics == {"step_accuracy": 0.8, "auroc_negative": 0.7}
    assert summary.seconds == 210.0
    assert summary.timings == {"train": 150.0, "evaluate": 60.0}
    assert status.runs[1].metrics == {"step_accuracy": None, "first_error_f1": None}
    assert status.runs[1].seconds == 12.0
    assert status.runs[0].seconds is None
    assert status.current is not None and status.current.id == old.id
    assert status.waiting is not None and status.waiting.id == waiting.id
    assert status.running is None


def test_the_current_checkpoint_older_than_the_runs_listed(session: Session) -> None:
    current = add_run(session, RunStatus.SUCCEEDED, is_current=True)
    for _ in range(3):
        add_run(session, RunStatus.FAILED)
    status = prm_status(session, limit=2)
    assert current.id not in [run.id for run in status.runs]
    assert status.current is not None and status.current.id == current.id


def test_generations_with_their_yield_and_labels(session: Session) -> None:
    run = add_run(session, RunStatus.SUCCEEDED)
    session.add_all(
        [
            Generation(number=1, run_id=run.id, selected=8, wrong_answers=6),
            Generation(number=2, run_id=run.id, selected=0, wrong_answers=0),
        ]
    )
    labeler = make_user(session, "ann")
    for generation, count in ((1, 3), (2, 1), (0, 2)):
        solution = make_solution(session, generation=generation)
        for _ in range(count):
            make_label(session, labeler, solution, [[1]])
    rows = prm_status(session).generations
    assert [(g.number, g.selected, g.wrong_answers, g.labels) for g in rows] == [
        (2, 0, 0, 1),
        (1, 8, 6, 3),
    ]
    assert rows[1].answer_yield == 6 / 8
    assert rows[0].answer_yield is None


def test_metric_series_follow_the_runs(session: Session) -> None:
    for accuracy in (0.5, 0.6):
        add_run(session, RunStatus.SUCCEEDED, metrics={"step_accuracy": accuracy})
    runs = list(reversed(prm_status(session).runs))
    series = metric_series(runs, ["step_accuracy", "auroc_negative"])
    assert [(s.name, list(s.values)) for s in series] == [
        (HEADLINE_METRICS["step_accuracy"], [0.5, 0.6]),
        (HEADLINE_METRICS["auroc_negative"], [None, None]),
    ]
