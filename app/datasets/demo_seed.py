"""``steplabel seed-demo``: demo users and a demo set of problems and solutions, once."""

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.datasets import demo
from app.datasets.importing import import_problems, import_solutions
from app.datasets.reading import SourceLine
from app.models import Role, User
from app.users import create_user, new_password

POOL_SEED = 1
DEMO_USERS = (("admin", Role.ADMIN), ("alice", Role.LABELER), ("bob", Role.LABELER))


@dataclass
class SeedReport:
    passwords: list[tuple[str, str, str]] = field(default_factory=list)
    """(name, role, password) of each user created now."""
    problems: int = 0
    solutions: int = 0
    pool: int = 0

    def describe(self) -> str:
        if not self.passwords:
            return "demo already seeded: nothing to do"
        users = "\n".join(
            f"  {name:<8} {role:<8} password: {password}" for name, role, password in self.passwords
        )
        return (
            f"demo seeded: {self.problems} problems, {self.solutions} solutions to label, "
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
    for name, role in DEMO_USERS:
        password = new_password()
        # Demo labelers skip screening so they can label the demo data at once.
        create_user(session, name, role, password, approved=True)
        report.passwords.append((name, role.value, password))
    problems = demo.demo_problems()
    report.problems = import_problems(session, _lines("demo-problems", problems)).added
    solutions = demo.demo_solutions(problems)
    report.solutions = import_solutions(session, _lines("demo-solutions", solutions)).added
    # Unqueued samples for the worker's active learning to choose the next generation from.
    pool = demo.demo_solutions(problems, seed=POOL_SEED, per_problem=6)
    report.pool = import_solutions(session, _lines("demo-pool", pool), queue=False).added
    return report
