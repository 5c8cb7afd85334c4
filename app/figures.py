"""What every figure of labeling work shares, on the dashboard and in quality control.

- ``by_labelers``: labels made by labelers, not admins: labeler statistics leave out an
  admin's labels (gold labels, trying the queue), which are not labeling work.
- ``regular_label_conditions``: the labels agreement and consensus count (labeling work,
  not QC or screening answers, not labels of a QC solution);
- ``share``: a part of a whole, or None where the whole is empty (never a made-up 0).
"""

from sqlalchemy import ColumnElement, SQLColumnExpression, exists, select

from app.models import UNNUMBERED_GENERATION, GoldLabel, Label, Role, User


def by_labelers(labeler_id: SQLColumnExpression[int] = Label.labeler_id) -> ColumnElement[bool]:
    """True for a label whose author is not an admin (``labeler_id``: an alias's column)."""
    return labeler_id.not_in(select(User.id).where(User.role == Role.ADMIN.value))


def regular_label_conditions(generation: int | None) -> list[ColumnElement[bool]]:
    """Labels by labelers that are not QC or screening labels, nor labels of a QC solution."""
    conditions = [
        by_labelers(),
        Label.is_quality_control.is_(False),
        Label.is_initial_screening.is_(False),
        ~exists().where(GoldLabel.solution_id == Label.solution_id),
    ]
    if generation == UNNUMBERED_GENERATION:
        conditions.append(Label.generation.is_(None))
    elif generation is not None:
        conditions.append(Label.generation == generation)
    return conditions


def share(part: int, whole: int) -> float | None:
    """``part / whole``; None for an empty whole."""
    return part / whole if whole else None
