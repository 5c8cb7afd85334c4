"""Labeling progress per generation: the queue, live leases, labels, ratings by class, and
the problems labelers reported as bad. Every figure is a GROUP BY in the database."""

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from app.models import (
    SCREENING_GENERATION,
    Assignment,
    FinishReason,
    Label,
    Problem,
    QueueState,
    Solution,
    StepCompletion,
    User,
    utc_now,
)
from app.quality.questions import not_a_question

RATING_NAMES: dict[int | None, str] = {-1: "negative", 0: "neutral", 1: "positive"}


@dataclass(frozen=True)
class RatingCounts:
    negative: int = 0
    neutral: int = 0
    positive: int = 0
    unrated: int = 0
    """Completions shown but left without a rating (PRM800K has some)."""

    @property
    def total(self) -> int:
        return self.negative + self.neutral + self.positive + self.unrated


@dataclass(frozen=True)
class GenerationProgress:
    """One generation's queue and labels; ``generation`` None gathers solutions and labels
    that belong to none (the unqueued pool, phase-1 labels)."""

    generation: int | None
    solutions: int = 0
    not_queued: int = 0
    open: int = 0
    """Solutions still waiting for labels."""
    full: int = 0
    """Solutions labeled by as many labelers as their overlap asks for."""
    labels_wanted: int = 0
    """Sum of the overlap of the queued (open or full) solutions."""
    labels_counted: int = 0
    """Labels done towards ``labels_wanted`` (at most the overlap per solution)."""
    leased: int = 0
    """Tasks held by a labeler right now (a live lease, not finished)."""
    labels: int = 0
    """Labels of this generation, quality-control, screening and imported ones included."""
    finish_reasons: dict[str, int] = field(default_factory=dict)
    ratings: RatingCounts = field(default_factory=RatingCounts)

    @property
    def share_done(self) -> float | None:
        return self.labels_counted / self.labels_wanted if self.labels_wanted else None


@dataclass(frozen=True)
class BadProblemReport:
    label_id: int
    problem_id: int
    solution_id: int | None
    generation: int | None
    problem_text: str
    labeler: str
    note: str | None
    timestamp: datetime


@dataclass(frozen=True)
class Progress:
    generations: list[GenerationProgress]
    bad_problems: list[BadProblemReport]
    """The latest reports, newest first."""
    bad_problem_count: int


def progress(
    session: Session, default_overlap: int, now: datetime | None = None, bad_problems: int = 20
) -> Progress:
    """Every generation's progress (by number, None last) and the latest bad-problem reports."""
    now = now or utc_now()
    queue = queue_by_generation(session, default_overlap)
    leased = _leases_by_generation(session, now)
    finishes = _finish_reasons_by_generation(session)
    ratings = _ratings_by_generation(session)
    keys = sorted(
        set(queue) | set(leased) | set(finishes) | set(ratings),
        key=lambda g: (g is None, g or 0),
    )
    generations = [
        GenerationProgress(
            generation=key,
            **queue.get(key, {}),
            leased=leased.get(key, 0),
            labels=sum(finishes.get(key, {}).values()),
            finish_reasons=finishes.get(key, {}),
            ratings=ratings.get(key, RatingCounts()),
        )
        for key in keys
    ]
    return Progress(
        generations=generations,
        bad_problems=recent_bad_problems(session, bad_problems),
        bad_problem_count=sum(
            g.finish_reasons.get(FinishReason.BAD_PROBLEM.value, 0) for g in generations
        ),
    )


def queue_by_generation(session: Session, default_overlap: int) -> dict[int | None, dict[str, int]]:
    overlap = func.coalesce(Solution.overlap, default_overlap)
    queued = Solution.queue_state != QueueState.NOT_QUEUED.value
    counted = case((Solution.completed_count < overlap, Solution.completed_count), else_=overlap)
    rows = session.execute(
        select(
            Solution.generation,
            Solution.queue_state,
            func.count(),
            func.sum(case((queued, overlap), else_=0)),
            func.sum(case((queued, counted), else_=0)),
        )
        # Questions stay open and are never filled: counted, a generation could never finish.
        .where(not_a_question())
        .group_by(Solution.generation, Solution.queue_state)
    )
    by_generation: dict[int | None, dict[str, int]] = {}
    for generation, state, count, wanted, done in rows:
        figures = by_generation.setdefault(
            generation,
            {"solutions": 0, "labels_wanted": 0, "labels_counted": 0}
            | {state.value: 0 for state in QueueState},
        )
        figures[state] = count
        figures["solutions"] += count
        figures["labels_wanted"] += int(wanted or 0)
        figures["labels_counted"] += int(done or 0)
    return by_generation


def _leases_by_generation(session: Session, now: datetime) -> dict[int | None, int]:
    rows = session.execute(
        select(Solution.generation, func.count())
        .select_from(Assignment)
        .join(Solution, Solution.id == Assignment.solution_id)
        .where(Assignment.completed_at.is_(None), Assignment.expires_at > now)
        .group_by(Solution.generation)
    )
    # A null generation is not != -1 in SQL: no row has one; the test narrows the type.
    return {generation: count for generation, count in rows if generation is not None}


def _finish_reasons_by_generation(session: Session) -> dict[int | None, dict[str, int]]:
    rows = session.execute(
        select(Label.generation, Label.finish_reason, func.count()).group_by(
            Label.generation, Label.finish_reason
        )
    )
    by_generation: dict[int | None, dict[str, int]] = {}
    for generation, reason, count in rows:
        reasons = by_generation.setdefault(generation, {})
        reasons[reason or "unfinished"] = count
    return by_generation


def _ratings_by_generation(session: Session) -> dict[int | None, RatingCounts]:
    rows = session.execute(
        select(Label.generation, StepCompletion.rating, func.count())
        .select_from(StepCompletion)
        .join(Label, Label.id == StepCompletion.label_id)
        .group_by(Label.generation, StepCompletion.rating)
    )
    counts: dict[int | None, dict[str, int]] = {}
    for generation, rating, count in rows:
        counts.setdefault(generation, {})[RATING_NAMES.get(rating, "unrated")] = count
    return {generation: RatingCounts(**named) for generation, named in counts.items()}


def recent_bad_problems(session: Session, limit: int) -> list[BadProblemReport]:
    """The latest labels that ended as a bad problem, with the labeler's note."""
    rows = session.execute(
        select(
            Label.id.label("label_id"),
            Label.problem_id,
            Label.solution_id,
            Label.generation,
            Problem.text.label("problem_text"),
            User.name.label("labeler"),
            Label.note,
            Label.timestamp,
        )
        .join(Problem, Problem.id == Label.problem_id)
        .join(User, User.id == Label.labeler_id)
        .where(Label.finish_reason == FinishReason.BAD_PROBLEM.value)
        .order_by(Label.timestamp.desc(), Label.id.desc())
        .limit(limit)
    )
    return [BadProblemReport(**row._asdict()) for row in rows]


def open_by_generation(session: Session) -> dict[int, int]:
    """Open solutions per generation, screening and quality-control questions left out:
    what agreement samples draw from (those with the overlap asked for already aside)."""
    rows = session.execute(
        select(Solution.generation, func.count())
        .where(
            Solution.queue_state == QueueState.OPEN.value,
            Solution.generation != SCREENING_GENERATION,
            not_a_question(),
        )
        .group_by(Solution.generation)
        .order_by(Solution.generation)
    )
    # A null generation is not != -1 in SQL: no row has one; the test narrows the type.
    return {generation: count for generation, count in rows if generation is not None}
