"""The admins' data pages: totals, a paged table of problems, one problem's solutions."""

import math
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse
from sqlalchemy import ScalarSelect, func, select, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, selectinload

from app.auth.sessions import current_admin
from app.core.db import RETRY_AFTER_S, DbSession, get_engine
from app.inputs import DbId, PageNumber
from app.models import Base, Label, Problem, Solution, StepCompletion, User
from app.templating import render, wants_fragment

PROBLEMS_PER_PAGE = 25

# The data overview is for admins; /healthz stays open for load balancers.
router = APIRouter()
admin = APIRouter(dependencies=[Depends(current_admin)])


@dataclass(frozen=True)
class Totals:
    problems: int
    solutions: int
    labels: int
    step_ratings: int
    users: int


@dataclass(frozen=True)
class ProblemRow:
    id: int
    source_id: str | None
    subject: str | None
    level: int | None
    text: str
    solution_count: int
    label_count: int


@dataclass(frozen=True)
class ProblemPage:
    rows: list[ProblemRow]
    page: int
    page_count: int
    total: int

    @property
    def has_previous(self) -> bool:
        return self.page > 1

    @property
    def has_next(self) -> bool:
        return self.page < self.page_count


@dataclass(frozen=True)
class ProblemDetail:
    problem: Problem
    solutions: list[Solution]
    label_counts: dict[int, int]
    """Labels per solution id; solutions without labels are absent."""


def totals(session: Session) -> Totals:
    """Row counts of the main tables, in one statement."""

    def count(model: type[Base]) -> ScalarSelect[int]:
        return select(func.count()).select_from(model).scalar_subquery()

    row = session.execute(
        select(
            count(Problem).label("problems"),
            count(Solution).label("solutions"),
            count(Label).label("labels"),
            count(StepCompletion).label("step_ratings"),
            count(User).label("users"),
        )
    ).one()
    return Totals(**row._asdict())


def problem_page(session: Session, page: int, per_page: int = PROBLEMS_PER_PAGE) -> ProblemPage:
    """One page of problems by id with their solution and label counts; ``page`` is clamped."""
    total = session.scalar(select(func.count()).select_from(Problem)) or 0
    page_count = max(1, math.ceil(total / per_page))
    page = min(max(page, 1), page_count)
    # Correlated counts use the problem_id indexes and run only for the rows on the page.
    solution_count = (
        select(func.count())
        .where(Solution.problem_id == Problem.id)
        .correlate(Problem)
        .scalar_subquery()
    )
    label_count = (
        select(func.count())
        .where(Label.problem_id == Problem.id)
        .correlate(Problem)
        .scalar_subquery()
    )
    result = session.execute(
        select(
            Problem.id,
            Problem.source_id,
            Problem.subject,
            Problem.level,
            Problem.text,
            solution_count.label("solution_count"),
            label_count.label("label_count"),
        )
        .order_by(Problem.id)
        .limit(per_page)
        .offset((page - 1) * per_page)
    )
    rows = [ProblemRow(**row._asdict()) for row in result]
    return ProblemPage(rows=rows, page=page, page_count=page_count, total=total)


def problem_detail(session: Session, problem_id: int) -> ProblemDetail | None:
    """A problem with its solutions (oldest first) and each solution's label count."""
    problem = session.scalar(
        select(Problem).where(Problem.id == problem_id).options(selectinload(Problem.solutions))
    )
    if problem is None:
        return None
    label_counts = session.execute(
        select(Label.solution_id, func.count())
        .where(Label.problem_id == problem_id)
        .group_by(Label.solution_id)
    )
    return ProblemDetail(
        problem=problem,
        solutions=sorted(problem.solutions, key=lambda solution: solution.id),
        # Phase-1 labels have no solution: their group is the null one.
        label_counts={
            solution_id: count for solution_id, count in label_counts if solution_id is not None
        },
    )


def existing_problem(problem_id: DbId, session: DbSession) -> ProblemDetail:
    """Dependency: the problem named in the path, or 404."""
    detail = problem_detail(session, problem_id)
    if detail is None:
        raise HTTPException(status_code=404, detail=f"There is no problem {problem_id}.")
    return detail


@admin.get("/admin/data", response_class=HTMLResponse)
def index(
    request: Request, session: DbSession, page: Annotated[PageNumber, Query()] = 1
) -> HTMLResponse:
    problems = problem_page(session, page)
    if wants_fragment(request):
        return render(request, "index.html", {"problems": problems}, block="problem_table")
    context = {"section": "data", "totals": totals(session), "problems": problems}
    return render(request, "index.html", context)


@admin.get("/admin/problems/{problem_id}", response_class=HTMLResponse)
def problem(
    request: Request, detail: Annotated[ProblemDetail, Depends(existing_problem)]
) -> HTMLResponse:
    return render(request, "problem.html", {"section": "data", "detail": detail})


@router.get("/healthz")
def healthz() -> JSONResponse:
    """Liveness: the process answers. It asks the database nothing, so that a supervisor
    does not restart every app process while the database restarts (/readyz says that)."""
    return JSONResponse({"status": "ok"})


readiness = APIRouter()
"""/readyz, open to anyone as /healthz is."""


@readiness.get("/readyz")
def readyz() -> JSONResponse:
    """Readiness: whether the database answers ``SELECT 1``; 503 with Retry-After while it
    does not, for a load balancer to send requests elsewhere meanwhile."""
    try:
        with get_engine().connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError as error:
        return JSONResponse(
            {"status": "unavailable", "database": type(error).__name__},
            status_code=503,
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    return JSONResponse({"status": "ready", "database": "ok"})
