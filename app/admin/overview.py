"""The dashboard's front page: the headline figures, each from one small aggregate, the
overall agreement between labelers, and what is left in the PRM's unlabeled pool."""

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from app.admin.agreement.metrics import AgreementSummary
from app.admin.agreement.views import overall_agreement
from app.admin.prm import Pool, RunSummary, pool_status, summarize
from app.admin.throughput import WINDOWS, throughput
from app.core.config import Settings
from app.figures import by_labelers
from app.models import Assignment, Label, QueueState, Role, Solution, User, utc_now
from app.quality.questions import not_a_question
from app.quality.scoring import combined, labeler_quality
from app.training import current_run, recent_runs

RECENT_RUNS = 5


@dataclass(frozen=True)
class Overview:
    labels_today: int
    """Since midnight UTC."""
    labels_total: int
    labelers_active_today: int
    leased_now: int
    open_solutions: int
    """Waiting in the regular queue (quality-control questions left out)."""
    labels_still_wanted: int
    """Labels the open solutions still need to reach their overlap."""
    awaiting_approval: int
    """Active labelers not yet approved (screening)."""
    labelers_passing_qc: int
    labelers_with_qc: int
    """Labelers with a QC verdict: ``qc_min_answers`` answers or more."""
    qc_min_answers: int
    qc_step_accuracy: float | None
    """Over every quality-control answer of every labeler."""
    agreement: AgreementSummary
    """Agreement between labelers over every regular label, as the agreement page has it."""
    hours: list[datetime]
    labels_per_hour: list[float]
    """The last 24 hours, hour by hour."""
    current_run: RunSummary | None
    recent_runs: list[RunSummary]
    pool: Pool
    """The unlabeled solutions the next generation is chosen from."""


def overview(
    session: Session,
    settings: Settings,
    default_overlap: int,
    threshold: float,
    now: datetime | None = None,
    *,
    min_answers: int = 1,
) -> Overview:
    """The headline figures at ``now``; ``threshold`` is the QC step accuracy that passes,
    after ``min_answers`` QC answers."""
    now = now or utc_now()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    today = Label.timestamp >= midnight
    labels_today, labels_total, active_today = session.execute(
        select(
            func.count().filter(today),
            func.count(),
            # Labelers only: an admin making gold labels is not labeling work.
            func.count(func.distinct(case((today & by_labelers(), Label.labeler_id)))),
        )
    ).one()
    remaining = func.coalesce(Solution.overlap, default_overlap) - Solution.completed_count
    # Quality-control questions stay open but are served beside the queue, never filled.
    open_solutions, still_wanted = session.execute(
        select(
            func.count(), func.coalesce(func.sum(case((remaining > 0, remaining), else_=0)), 0)
        ).where(
            Solution.queue_state == QueueState.OPEN.value,
            not_a_question(),
        )
    ).one()
    leased_now = session.scalar(
        select(func.count()).where(Assignment.completed_at.is_(None), Assignment.expires_at > now)
    )
    awaiting = session.scalar(
        select(func.count()).where(
            User.role == Role.LABELER.value, User.is_active.is_(True), User.is_approved.is_(False)
        )
    )
    labelers = labeler_quality(session, threshold, min_answers=min_answers)
    verdicts = [row.passes_quality_control for row in labelers]
    last_day = throughput(session, WINDOWS["24h"], now)
    current = current_run(session)
    return Overview(
        labels_today=labels_today,
        labels_total=labels_total,
        labelers_active_today=active_today,
        leased_now=leased_now or 0,
        open_solutions=open_solutions,
        labels_still_wanted=int(still_wanted),
        awaiting_approval=awaiting or 0,
        labelers_passing_qc=sum(verdict is True for verdict in verdicts),
        labelers_with_qc=sum(verdict is not None for verdict in verdicts),
        qc_min_answers=min_answers,
        qc_step_accuracy=combined(row.quality_control for row in labelers).step_accuracy,
        agreement=overall_agreement(session),
        hours=last_day.bucket_starts,
        labels_per_hour=last_day.overall.per_hour,
        current_run=summarize(current) if current else None,
        recent_runs=[summarize(run) for run in recent_runs(session, RECENT_RUNS)],
        pool=pool_status(session, settings),
    )
