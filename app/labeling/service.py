"""Plain functions behind the labeling pages: the task view and the guidelines."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import Connection, bindparam, select
from sqlalchemy.orm import Session

from app.auth import LOGIN_COLUMNS, LOGIN_USER, Login, Viewer, viewer_of
from app.config import Settings
from app.labeling.queue import (
    CONTENT_COLUMNS,
    LEASE_COLUMNS,
    OPEN_LEASE,
    WITH_CONTENT,
    Lease,
    QueueRules,
    content_from,
    lease_from,
)
from app.labeling.submission import LEASED_TASKS, TASK_COLUMNS, LeasedTask, task_from
from app.models import ASSIGNMENTS, PROBLEMS, SOLUTIONS, USERS
from app.project_settings import get_value, runtime_settings, set_value
from app.statements import run

DEFAULT_GUIDELINES = (Path(__file__).parent / "guidelines.md").read_text()
GUIDELINES_KEY = "guidelines"


def queue_rules(connection: Connection, settings: Settings) -> QueueRules:
    values = runtime_settings(connection, settings)
    return QueueRules(
        lease=timedelta(minutes=settings.lease_minutes),
        overlap=int(values["overlap"]),
        qc_rate=float(values["qc_rate"]),
    )


# A labeling request checks the login with the query it starts with anyway (one round
# trip fewer): the user's row, outer-joined with what the request needs.
_LABELER_AND_OPEN_LEASE = (
    select(*LOGIN_COLUMNS, *LEASE_COLUMNS, *CONTENT_COLUMNS)
    .select_from(
        USERS.outerjoin(ASSIGNMENTS, OPEN_LEASE)
        .outerjoin(SOLUTIONS, ASSIGNMENTS.c.solution_id == SOLUTIONS.c.id)
        .outerjoin(PROBLEMS, *WITH_CONTENT)
    )
    .where(LOGIN_USER)
    .order_by(ASSIGNMENTS.c.id)
    .limit(1)
)
_LABELER_AND_TASK = (
    select(*LOGIN_COLUMNS, *TASK_COLUMNS)
    .select_from(USERS.outerjoin(LEASED_TASKS, ASSIGNMENTS.c.id == bindparam("assignment_id")))
    .where(LOGIN_USER)
)


def labeler_and_open_lease(connection: Connection, login: Login) -> tuple[Viewer, Lease | None]:
    """The logged-in labeler (401 if the login ended) and their unfinished task, if any."""
    params = {"user_id": login.user_id, "labeler_id": login.user_id}
    row = run(connection, _LABELER_AND_OPEN_LEASE, params).first()
    return viewer_of(row, login), lease_from(row)


def labeler_and_task(
    connection: Connection, login: Login, assignment_id: int
) -> tuple[Viewer, LeasedTask | None]:
    """The logged-in labeler (401 if the login ended) and the task ``assignment_id``."""
    params = {"user_id": login.user_id, "assignment_id": assignment_id}
    row = run(connection, _LABELER_AND_TASK, params).first()
    return viewer_of(row, login), task_from(row)


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


_TASK_CONTENT = (
    select(*CONTENT_COLUMNS)
    .join_from(SOLUTIONS, PROBLEMS, *WITH_CONTENT)
    .where(SOLUTIONS.c.id == bindparam("solution_id"))
)


def task_view(connection: Connection, lease: Lease) -> TaskView:
    content = lease.content or content_from(
        run(connection, _TASK_CONTENT, {"solution_id": lease.solution_id}).one()
    )
    assert content is not None
    steps = content.steps or []
    alternatives = list(content.alternatives or [])
    alternatives += [[] for _ in range(len(steps) - len(alternatives))]
    return TaskView(
        assignment_id=lease.id,
        problem=content.problem,
        reference_answer=content.reference_answer,
        steps=steps,
        alternatives=alternatives[: len(steps)],
        style=content.style,
        expires_at=lease.expires_at,
    )


def guidelines(session: Session) -> str:
    text: str = get_value(session, GUIDELINES_KEY, DEFAULT_GUIDELINES)
    return text


def save_guidelines(session: Session, text: str) -> None:
    set_value(session, GUIDELINES_KEY, text)
