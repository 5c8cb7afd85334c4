"""The dashboard's headline figures, counted by hand from the fixture."""

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from app.admin.overview import overview
from app.admin.throughput import WINDOWS, throughput
from app.auth.users import deactivate
from app.core.config import Settings
from app.models import Assignment, QueueState, Role, RunStatus, TrainingRun
from app.quality.questions import mark_quality_control
from tests.factories import make_label, make_solution, make_user

NOW = datetime(2026, 5, 4, 9, 15)
TODAY = datetime(2026, 5, 4)


def test_headline_figures(session: Session) -> None:
    admin = make_user(session, "root", role=Role.ADMIN)
    ann, bob, cid = (make_user(session, name) for name in ("ann", "bob", "cid"))
    make_user(session, "newcomer", approved=False)
    make_user(session, "gone", approved=False)
    deactivate(session, "gone")  # inactive: not waiting for anyone

    open_solutions = [
        make_solution(session, overlap=3),  # 3 wanted, 1 done below
        make_solution(session),  # default overlap 2: 2 wanted
        make_solution(session, overlap=1),  # done already but still open: 0 wanted
    ]
    open_solutions[0].completed_count = 1
    open_solutions[2].completed_count = 1
    make_solution(session, queue_state=QueueState.FULL)

    gold = make_solution(session)
    gold_label = make_label(session, admin, gold, [[1], [1]], timestamp=NOW - timedelta(days=2))
    mark_quality_control(session, gold.id, gold_label.id)
    make_label(session, ann, gold, [[1], [1]], timestamp=NOW - timedelta(hours=2))  # passes
    make_label(session, bob, gold, [[1], [-1]], finish_reason="found_error", timestamp=TODAY)
    make_label(session, cid, open_solutions[0], [[1]], timestamp=TODAY - timedelta(seconds=1))

    for labeler, minutes in ((ann, 10), (bob, -1)):
        session.add(
            Assignment(
                solution_id=open_solutions[1].id,
                labeler_id=labeler.id,
                slot=minutes,
                leased_at=NOW - timedelta(minutes=5),
                expires_at=NOW + timedelta(minutes=minutes),
            )
        )
    current = TrainingRun(status=RunStatus.SUCCEEDED.value, is_current=True, metrics={})
    later = TrainingRun(status=RunStatus.REQUESTED.value)
    session.add_all([current, later])
    session.flush()

    figures = overview(session, Settings(), default_overlap=2, threshold=0.75, now=NOW)
    assert (figures.labels_today, figures.labels_total) == (2, 4)  # ann's and bob's
    assert figures.labelers_active_today == 2
    assert figures.leased_now == 1  # bob's lease ran out a minute ago
    assert (figures.open_solutions, figures.labels_still_wanted) == (3, (3 - 1) + 2 + 0)
    assert figures.awaiting_approval == 1
    # ann agrees on 2 of 2 steps, bob on 1 of 2: with a threshold of 75% one passes of two.
    assert (figures.labelers_passing_qc, figures.labelers_with_qc) == (1, 2)
    assert figures.qc_step_accuracy == 3 / 4
    assert figures.current_run is not None and figures.current_run.id == current.id
    assert [run.id for run in figures.recent_runs] == [later.id, current.id]
    last_day = throughput(session, WINDOWS["24h"], NOW)
    assert (figures.hours, figures.labels_per_hour) == (
        last_day.bucket_starts,
        last_day.overall.per_hour,
    )
    assert sum(figures.labels_per_hour) == 3  # all but the gold label, two days old


def test_an_empty_project(session: Session) -> None:
    figures = overview(session, Settings(), default_overlap=1, threshold=0.8, now=NOW)
    assert (figures.labels_total, figures.open_solutions, figures.labels_still_wanted) == (0, 0, 0)
    assert figures.qc_step_accuracy is None and figures.current_run is None
    assert (figures.agreement.steps, figures.agreement.krippendorff_alpha) == (0, None)
    assert figures.recent_runs == [] and sum(figures.labels_per_hour) == 0


def test_an_admins_labels_make_no_labeler_and_qc_waits_for_enough_answers(
    session: Session,
) -> None:
    admin, ann = make_user(session, "root", role=Role.ADMIN), make_user(session, "ann")
    gold = make_solution(session)
    gold_label = make_label(session, admin, gold, [[1], [1]], timestamp=NOW - timedelta(hours=1))
    mark_quality_control(session, gold.id, gold_label.id)
    make_label(session, ann, gold, [[1], [-1]], finish_reason="found_error", timestamp=NOW)
    make_label(session, admin, make_solution(session), [[1]], timestamp=NOW)

    figures = overview(session, Settings(), default_overlap=1, threshold=0.8, now=NOW)
    assert (figures.labels_today, figures.labelers_active_today) == (3, 1)
    assert sum(figures.labels_per_hour) == 1  # ann's answer alone
    assert (figures.labelers_passing_qc, figures.labelers_with_qc) == (0, 1)  # ann fails
    waiting = overview(session, Settings(), 1, 0.8, NOW, min_answers=2)
    assert (waiting.labelers_passing_qc, waiting.labelers_with_qc) == (0, 0)
    assert waiting.qc_step_accuracy == 1 / 2 and waiting.qc_min_answers == 2
