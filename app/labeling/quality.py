"""Quality-control questions: solutions whose gold label every labeler is checked against."""

from sqlalchemy.orm import Session

from app.models import GoldLabel, Label


def mark_quality_control(session: Session, solution_id: int, label_id: int) -> GoldLabel:
    """Make ``label_id`` the gold label of ``solution_id``; it is then served to everyone.

    Raises LookupError for an unknown label, ValueError for a label of another solution.
    """
    label = session.get(Label, label_id)
    if label is None:
        raise LookupError(f"there is no label {label_id}")
    if label.solution_id != solution_id:
        raise ValueError(f"label {label_id} is not a label of solution {solution_id}")
    gold = session.get(GoldLabel, solution_id)
    if gold is None:
        gold = GoldLabel(solution_id=solution_id, label_id=label_id)
        session.add(gold)
    else:
        gold.label_id = label_id
    session.flush()
    return gold


def unmark_quality_control(session: Session, solution_id: int) -> None:
    gold = session.get(GoldLabel, solution_id)
    if gold is None:
        raise LookupError(f"solution {solution_id} is not a quality-control question")
    session.delete(gold)
    session.flush()
