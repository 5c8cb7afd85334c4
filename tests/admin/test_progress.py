"""Progress per generation against counts taken by hand from the fixture's rows."""

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.admin.progress import RatingCounts, open_by_generation, progress
from app.models import Assignment, QueueState, Role, Solution, User
from app.quality.questions import mark_quality_control
from tests.factories import make_label, make_solution, make_user

NOW = datetime(2026, 5, 4, 12)
DEFAULT_OVERLAP = 2


@dataclass(frozen=True)
class SolutionSpec:
    generation: int | None
    state: QueueState
    overlap: int | None
    completed: int


SOLUTIONS = [
    SolutionSpec(0, QueueState.OPEN, None, 1),
    SolutionSpec(0, QueueState.FULL, None, 2),
    SolutionSpec(0, QueueState.FULL, 1, 3),  # more labels than its overlap asks for
    SolutionSpec(1, QueueState.OPEN, 3, 0),
    SolutionSpec(1, QueueState.OPEN, None, 0),
    SolutionSpec(-1, QueueState.OPEN, None, 0),
    SolutionSpec(None, QueueState.NOT_QUEUED, None, 0),
]
# (solution index, ratings, finish reason)
LABELS = [
    (0, [[1], [0], [-1, 1, None]], "found_error"),
    (1, [[1], [1]], "solution"),
    (1, [[0], [1]], "solution"),
    (2, [], "bad_problem"),
    (3, [[1]], "give_up"),
    (5, [[-1]], "found_error"),
]
# (solution index, minutes the lease has left, finished)
LEASES = [(3, 10, False), (4, -5, False), (4, 20, True), (0, 1, False)]


def build(session: Session) -> tuple[list[Solution], list[User]]:
    labelers = [make_user(session, f"labeler-{i}") for i in range(3)]
    solutions = []
    for spec in SOLUTIONS:
        solution = make_solution(
            session, generation=spec.generation, queue_state=spec.state, overlap=spec.overlap
        )
        solution.completed_count = spec.completed
        solutions.append(solution)
    for number, (index, ratings, reason) in enumerate(LABELS):
        make_label(
            session,
            labelers[number % 3],
            solutions[index],
            ratings,
            finish_reason=reason,
            note="unreadable" if reason == "bad_problem" else None,
            timestamp=NOW - timedelta(minutes=len(LABELS) - number),
        )
    for slot, (index, minutes, finished) in enumerate(LEASES):
        session.add(
            Assignment(
                solution_id=solutions[index].id,
                labeler_id=labelers[slot % 3].id,
                slot=slot,
                leased_at=NOW - timedelta(minutes=30),
                expires_at=NOW + timedelta(minutes=minutes),
                completed_at=NOW if finished else None,
            )
        )
    session.flush()
    return solutions, labelers


def test_every_generation_is_counted_by_hand(session: Session) -> None:
    build(session)
    result = progress(session, DEFAULT_OVERLAP, now=NOW)
    generations = [g.generation for g in result.generations]
    assert generations == [-1, 0, 1, None]

    for figures in result.generations:
        mine = [s for s in SOLUTIONS if s.generation == figures.generation]
        queued = [s for s in mine if s.state != QueueState.NOT_QUEUED]
        assert figures.solutions == len(mine)
        assert figures.open == sum(s.state == QueueState.OPEN for s in mine)
        assert figures.full == sum(s.state == QueueState.FULL for s in mine)
        assert figures.not_queued == sum(s.state == QueueState.NOT_QUEUED for s in mine)
        wanted = [s.overlap or DEFAULT_OVERLAP for s in queued]
        assert figures.labels_wanted == sum(wanted)
        assert figures.labels_counted == sum(
            min(s.completed, want) for s, want in zip(queued, wanted, strict=True)
        )
        live = [
            i
            for i, minutes, finished in LEASES
            if not finished and minutes > 0 and SOLUTIONS[i].generation == figures.generation
        ]
        assert figures.leased == len(live)
        labels = [label for label in LABELS if SOLUTIONS[label[0]].generation == figures.generation]
        assert figures.labels == len(labels)
        assert figures.finish_reasons == dict(Counter(reason for _, _, reason in labels))
        ratings = Counter(r for _, steps, _ in labels for step in steps for r in step)
        assert figures.ratings == RatingCounts(
            negative=ratings[-1], neutral=ratings[0], positive=ratings[1], unrated=ratings[None]
        )


def test_share_done_and_rating_total(session: Session) -> None:
    build(session)
    zero = next(
        g for g in progress(session, DEFAULT_OVERLAP, now=NOW).generations if g.generation == 0
    )
    # Overlaps 2, 2 and 1; completed 1, 2 and 3 (counted as 1).
    assert zero.share_done == (1 + 2 + 1) / (2 + 2 + 1)
    # Five completions rated (one left unrated) in the first label, two in each of two more.
    assert zero.ratings.total == 5 + 2 + 2


def test_bad_problems_newest_first_with_their_notes(session: Session) -> None:
    solutions, labelers = build(session)
    later = make_label(
        session,
        labelers[0],
        solutions[4],
        [],
        finish_reason="bad_problem",
        note="the statement is cut off",
        timestamp=NOW,
    )
    result = progress(session, DEFAULT_OVERLAP, now=NOW)
    assert result.bad_problem_count == 2
    assert [(r.label_id, r.note) for r in result.bad_problems] == [
        (later.id, "the statement is cut off"),
        (result.bad_problems[1].label_id, "unreadable"),
    ]
    first = result.bad_problems[0]
    assert (first.problem_id, first.solution_id, first.generation, first.labeler) == (
        solutions[4].problem_id,
        solutions[4].id,
        1,
        "labeler-0",
    )
    assert len(progress(session, DEFAULT_OVERLAP, now=NOW, bad_problems=1).bad_problems) == 1


def test_open_by_generation_leaves_out_screening_qc_questions_and_the_pool(
    session: Session,
) -> None:
    build(session)
    expected = Counter(
        s.generation
        for s in SOLUTIONS
        if s.state == QueueState.OPEN and s.generation is not None and s.generation >= 0
    )
    assert open_by_generation(session) == dict(expected)
    question = session.scalars(
        select(Solution)
        .where(Solution.queue_state == QueueState.OPEN.value, Solution.generation >= 0)
        .limit(1)
    ).one()
    admin = make_user(session, "gold-admin", role=Role.ADMIN)
    gold = make_label(session, admin, question, [[1] for _ in question.steps or []])
    mark_quality_control(session, question.id, gold.id)
    expected[question.generation] -= 1
    assert open_by_generation(session) == {g: n for g, n in expected.items() if n}


def test_a_quality_control_question_is_no_queued_work(session: Session) -> None:
    """A question stays open and is never filled: counted, its generation would never be
    done (the worker's pace reads the same figures)."""
    solutions, _ = build(session)
    before = {g.generation: g for g in progress(session, DEFAULT_OVERLAP, now=NOW).generations}
    question = solutions[3]  # generation 1, open, overlap 3
    admin = make_user(session, "gold-admin", role=Role.ADMIN)
    mark_quality_control(session, question.id, make_label(session, admin, question, [[1]]).id)
    after = {g.generation: g for g in progress(session, DEFAULT_OVERLAP, now=NOW).generations}
    assert (after[1].solutions, after[1].open) == (before[1].solutions - 1, before[1].open - 1)
    assert after[1].labels_wanted == before[1].labels_wanted - 3
    assert after[1].labels_counted == before[1].labels_counted
    assert after[0] == before[0]


def test_an_empty_project(session: Session) -> None:
    result = progress(session, DEFAULT_OVERLAP, now=NOW)
    assert (result.generations, result.bad_problems, result.bad_problem_count) == ([], [], 0)
