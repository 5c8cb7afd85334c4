"""What every figure of labeling work shares, on the dashboard and in quality control.

- ``by_labelers``: labels made by labelers, not admins: labeler statistics leave out an
  admin's labels (gold labels, trying the queue), which are not labeling work.
- ``share``: a part of a whole, or None where the whole is empty (never a made-up 0).
"""

from sqlalchemy import ColumnElement, select

from app.models import Label, Role, User


def by_labelers() -> ColumnElement[bool]:
    """True for a label (of ``Label``, not an alias) whose author is not an admin."""
    return Label.labeler_id.not_in(select(User.id).where(User.role == Role.ADMIN.value))


def share(part: int, whole: int) -> float | None:
    """``part / whole``; None for an empty whole."""
    return part / whole if whole else None
