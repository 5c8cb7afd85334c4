"""``steplabel seed-demo``: demo users and a demo set of problems and solutions, once.

The demo shows the whole loop with its two labelers: the first solutions in the queue go to
both of them, so agreement figures appear after a few labels, and a few more solutions are
quality-control questions whose gold labels are the demo admin's own labels, imported and
marked the way an admin does it (``steplabel import prm800k``, ``steplabel qc add``).
A few phase-1 tasks sit near the head of the queue, so that a new user meets candidates to
choose from, and a step where none is right and they write it themselves. A few phase-2
solutions with a planted slip offer alternatives at it (the step without the slip, and with
another slip), rated once the slip is rated negative; the first of them is a new user's
second task.
"""

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app import prm800k
from app.auth.users import create_user, new_password
from app.datasets import demo
from app.datasets.importing import import_prm800k, import_problems, import_solutions
from app.datasets.reading import SourceLine
from app.models import Label, QueueState, Role, Solution, User, utc_now
from app.quality.questions import mark_quality_control

POOL_SEED = 1
DEMO_USERS = (("admin", Role.ADMIN), ("alice", Role.LABELER), ("bob", Role.LABELER))
SHARED_SOLUTIONS = 12
"""The first solutions in the queue, which both demo labelers label."""
SHARED_OVERLAP = 2
QUALITY_CONTROL_QUESTIONS = 2
DEMO_PROBLEMS = 48
QUEUED_PER_PROBLEM = 2
"""Many problems, few solutions each, queued problem by problem in turn: the PRM's first
run holds out a fifth of the labeled problems for its step AUROC (and needs 5), so the
demo's first 60 labels must span some 30 problems, not 15."""
PHASE1_TASKS = 3
PHASE1_AFTER = 2
"""Queue positions of regular solutions before the phase-1 tasks: a new user starts with
the simpler phase-2 style."""
ALTERNATIVE_TASKS = 3
"""Phase-2 solutions with alternatives at their slip: the first with a slip in the queue."""
ALTERNATIVES_AT = 1
"""The queue position the first of them moves to, before the phase-1 tasks."""
GOLD_MS_PER_STEP = 20_000
"""The time the admin's gold labels record per step rated: every PRM800K line has one."""


@dataclass
class SeedReport:
    passwords: list[tuple[str, str, str]] = field(default_factory=list)
    """(name, role, password) of each user created now."""
    problems: int = 0
    solutions: int = 0
    """Queued for labeling, the quality-control questions among them."""
    shared: int = 0
    phase1: int = 0
    """Phase-1 tasks among the solutions."""
    alternatives: int = 0
    """Phase-2 solutions among them with alternatives to rate at their slip."""
    quality_control: int = 0
    pool: int = 0

    def describe(self) -> str:
        if not self.passwords:
            return "demo already seeded: nothing to do"
        users = "\n".join(
            f"  {name:<8} {role:<8} password: {password}" for name, role, password in self.passwords
        )
        return (
            f"demo seeded: {self.problems} problems, {self.solutions} solutions to label "
            f"(the first {self.shared} by both labelers, {self.phase1} phase-1 tasks, "
            f"{self.alternatives} with alternatives to rate at their error, "
            f"{self.quality_control} "
            f"quality-control questions with the admin's gold labels), "
            f"{self.pool} more in the pool the PRM selects from\nusers:\n{users}"
        )


def _lines(name: str, rows: list[dict[str, object]]) -> Iterator[SourceLine]:
    for number, row in enumerate(rows, start=1):
        yield SourceLine(name, number, json.dumps(row))


def seed(session: Session) -> SeedReport:
    """Create the demo users and data unless the demo admin already exists."""
    report = SeedReport()
    if session.scalar(select(User.id).where(User.name == DEMO_USERS[0][0])) is not None:
        return report
    accounts = {}
    for name, role in DEMO_USERS:
        password = new_password()
        # Demo labelers skip screening so they can label the demo data at once.
        accounts[name] = create_user(session, name, role, password, approved=True)
        report.passwords.append((name, role.value, password))
    problems = demo.demo_problems(count=DEMO_PROBLEMS)
    report.problems = import_problems(session, _lines("demo-problems", problems)).added
    solutions = round_robin(demo.demo_solutions(problems, per_problem=QUEUED_PER_PROBLEM))
    slips = demo.demo_slips(problems, per_problem=QUEUED_PER_PROBLEM)
    solutions, report.alternatives = with_alternatives(solutions, slips, ALTERNATIVE_TASKS)
    phase1 = demo.demo_phase1_solutions(problems[:PHASE1_TASKS], solutions)
    queued = [*solutions[:PHASE1_AFTER], *phase1, *solutions[PHASE1_AFTER:]]
    report.solutions = import_solutions(session, _lines("demo-solutions", queued)).added
    report.phase1 = len(phase1)
    report.shared = _share_the_head_of_the_queue(session, SHARED_SOLUTIONS)
    # Unqueued samples for the worker's active learning to choose the next generation from.
    pool = demo.demo_solutions(problems, seed=POOL_SEED, per_problem=6)
    report.pool = import_solutions(session, _lines("demo-pool", pool), queue=False).added
    gold = demo.demo_gold_solutions(problems[-QUALITY_CONTROL_QUESTIONS:], [*solutions, *pool])
    questions = [answer_key.line() for answer_key in gold]
    report.solutions += import_solutions(session, _lines("demo-quality-control", questions)).added
    report.quality_control = _make_gold(session, accounts["admin"], problems, gold)
    return report


def round_robin(solutions: list[dict[str, object]]) -> list[dict[str, object]]:
    """Each problem's first solution, then each one's second, and so on (queue order)."""
    rank: dict[object, int] = {}
    ranked = []
    for solution in solutions:
        problem = solution["unique_id"]
        rank[problem] = rank.get(problem, -1) + 1
        ranked.append((rank[problem], solution))
    return [solution for _, solution in sorted(ranked, key=lambda pair: pair[0])]


def with_alternatives(
    solutions: list[dict[str, Any]],
    slips: Mapping[tuple[str, ...], demo.SlippedStep | None],
    count: int,
) -> tuple[list[dict[str, Any]], int]:
    """The solutions in queue order, the first ``count`` with a planted slip given their
    alternatives, the first of those moved to ALTERNATIVES_AT; and how many have them."""
    given: list[int] = []
    lines = []
    for position, line in enumerate(solutions):
        slip = slips.get(tuple(line["steps"]))
        if slip is not None and slip.alternatives and len(given) < count:
            line = {**line, "alternatives": slip.line_alternatives()}
            given.append(position)
        lines.append(line)
    if given:
        lines.insert(ALTERNATIVES_AT, lines.pop(given[0]))
    return lines, len(given)


def _share_the_head_of_the_queue(session: Session, count: int) -> int:
    """Give the first ``count`` solutions in queue order to SHARED_OVERLAP labelers each."""
    head = session.scalars(
        select(Solution.id)
        .where(Solution.queue_state == QueueState.OPEN.value)
        .order_by(Solution.generation, Solution.id)
        .limit(count)
    ).all()
    session.execute(update(Solution).where(Solution.id.in_(head)).values(overlap=SHARED_OVERLAP))
    return len(head)


def _make_gold(
    session: Session,
    admin: User,
    problems: list[dict[str, object]],
    gold: list[demo.GoldSolution],
) -> int:
    """Import the admin's labels of the ``gold`` solutions and make each the gold label of
    its solution; returns how many questions that makes."""
    records = {record["unique_id"]: record for record in problems}
    lines = [_admin_label(admin, records[answer_key.unique_id], answer_key) for answer_key in gold]
    import_prm800k(session, _lines("demo-gold-labels", lines))
    labels = session.execute(
        select(Solution.id, Label.id)
        .join(Label, Label.solution_id == Solution.id)
        .where(Label.labeler_id == admin.id)
    )
    questions = 0
    for solution_id, label_id in labels.all():
        mark_quality_control(session, solution_id, label_id)
        questions += 1
    return questions


def _admin_label(
    admin: User, problem: dict[str, object], answer_key: demo.GoldSolution
) -> dict[str, object]:
    """The admin's label of a solution, rated by its answer key, as a PRM800K line."""
    question = prm800k.question_dict(
        str(problem["problem"]),
        str(problem["solution"]),
        str(problem["answer"]),
        (answer_key.steps, answer_key.answer, answer_key.score),
    )
    steps = [
        # PRM800K chooses no completion at a negative step, and leaves a pre-generated
        # step's flag null.
        prm800k.step_dict(
            [prm800k.completion_dict(text, rating, None)], None, 0 if rating >= 0 else None
        )
        for text, rating in zip(answer_key.steps, answer_key.ratings, strict=False)
    ]
    return prm800k.record_dict(
        labeler=admin.uuid,
        timestamp=utc_now(),
        generation=0,
        is_quality_control=False,
        is_initial_screening=False,
        question=question,
        steps=steps,
        total_time=GOLD_MS_PER_STEP * len(steps),
        finish_reason=answer_key.finish_reason,
    )
