"""Plain functions behind the labeling pages: the task view, my work, the guidelines."""

import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.config import Settings
from app.labeling.queue import QueueRules
from app.models import Assignment, Label, Problem, User, utc_now
from app.project_settings import get_value, runtime_settings, set_value

DEFAULT_GUIDELINES = (Path(__file__).parent / "guidelines.md").read_text()
GUIDELINES_KEY = "guidelines"


def queue_rules(session: Session, settings: Settings) -> QueueRules:
    values = runtime_settings(session, settings)
    return QueueRules(
        lease=timedelta(minutes=settings.lease_minutes),
        overlap=int(values["overlap"]),
        qc_rate=float(values["qc_rate"]),
    )


@dataclass(frozen=True)
class TaskView:
    """What the labeling page shows for one task."""

    assignment_id: int
    problem: str
    reference_answer: str | None
    steps: list[str]
    alternatives: list[list[str]]
    style: str
    expires_at: datetime


def task_view(session: Session, assignment: Assignment) -> TaskView:
    solution = assignment.solution
    problem = session.get(Problem, solution.problem_id)
    assert problem is not None
    steps = solution.steps or []
    alternatives = list(solution.alternatives or [])
    alternatives += [[] for _ in range(len(steps) - len(alternatives))]
    return TaskView(
        assignment_id=assignment.id,
        problem=problem.text,
        reference_answer=problem.ground_truth_answer,
        steps=steps,
        alternatives=alternatives[: len(steps)],
        style=solution.style,
        expires_at=assignment.expires_at,
    )


@dataclass(frozen=True)
class MyWork:
    today: int
    total: int
    median_seconds: float | None
    """Median time per task, over tasks with a recorded time."""


def my_work(session: Session, labeler: User, now: datetime | None = None) -> MyWork:
    now = now or utc_now()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    rows = session.execute(
        select(Label.timestamp, Label.total_time).where(Label.labeler_id == labeler.id)
    ).all()
    times = [row.total_time for row in rows if row.total_time is not None]
    return MyWork(
        today=sum(row.timestamp >= midnight for row in rows),
        total=len(rows),
        median_seconds=statistics.median(times) / 1000 if times else None,
    )


def guidelines(session: Session) -> str:
    text: str = get_value(session, GUIDELINES_KEY, DEFAULT_GUIDELINES)
    return text


def save_guidelines(session: Session, text: str) -> None:
    set_value(session, GUIDELINES_KEY, text)
