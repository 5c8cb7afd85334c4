"""The users page: every account with its work so far and, for labelers, how they did on
screening and quality control. Changes to accounts go through app/auth/users.py."""

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.auth import users
from app.models import Label, Role, User
from app.quality.scoring import LabelerQuality, labeler_quality


@dataclass(frozen=True)
class Person:
    id: int
    name: str
    role: str
    is_active: bool
    is_approved: bool
    created_at: datetime
    labels: int
    last_label_at: datetime | None
    quality: LabelerQuality | None
    """Screening score and QC accuracy; None for admins."""

    @property
    def awaiting_approval(self) -> bool:
        """An active labeler still in screening."""
        return self.role == Role.LABELER.value and self.is_active and not self.is_approved


def people(session: Session, threshold: float) -> list[Person]:
    """Every user: labelers awaiting approval first, then admins, then by name."""
    quality = {row.labeler_id: row for row in labeler_quality(session, threshold)}
    work = {
        labeler_id: (count, last)
        for labeler_id, count, last in session.execute(
            select(Label.labeler_id, func.count(), func.max(Label.timestamp)).group_by(
                Label.labeler_id
            )
        )
    }
    everyone = []
    for account in session.scalars(select(User).order_by(User.role, User.name)):
        labels, last = work.get(account.id, (0, None))
        everyone.append(
            Person(
                id=account.id,
                name=account.name,
                role=account.role,
                is_active=account.is_active,
                is_approved=account.is_approved,
                created_at=account.created_at,
                labels=labels,
                last_label_at=last,
                quality=quality.get(account.id),
            )
        )
    return sorted(everyone, key=lambda person: not person.awaiting_approval)


def create_account(
    session: Session, name: str, role: str, *, approved: bool, admin: User
) -> tuple[User, str]:
    """A new user made by ``admin``, with a random password, returned once to show them.

    Raises ValueError, for the form, on an empty, overlong or taken name or an unknown role.
    """
    if role not in set(Role):
        raise ValueError(f"the role is one of {', '.join(Role)}, not {role!r}")
    password = users.new_password()
    user = users.create_user(session, name, Role(role), password, approved=approved, actor=admin)
    return user, password
