"""The Data screen's figures: totals, a paged table of problems, one problem's solutions."""

import math
from dataclasses import dataclass

from sqlalchemy import ScalarSelect, func, select
from sqlalchemy.orm import Session, selectinload

from app.models import Base, Label, Problem, Solution, StepCompletion, User

PROBLEMS_PER_PAGE = 25


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
