"""Quality-control questions: solutions whose gold label every labeler is checked against.

Once the worker opens generations, each generation gets the QC questions there are (those
of screening aside): labelers answer them within that generation, once per generation, and
their labels carry its number. A question marked later joins the newest generation.
"""

from sqlalchemy import ColumnElement, SQLColumnExpression, exists, func, select
from sqlalchemy.orm import Session

from app import audit
from app.models import (
    SCREENING_GENERATION,
    GenerationQualityControl,
    GoldLabel,
    Label,
    Solution,
    StepCompletion,
    User,
)


def not_a_question() -> ColumnElement[bool]:
    """A condition on ``Solution``: it is no quality-control question (it has no gold label).
    Questions stay open, but are served beside the queue, never sampled or filled."""
    return ~exists().where(GoldLabel.solution_id == Solution.id)


def asked_again() -> ColumnElement[bool]:
    """A condition on ``Solution``, a question: whoever answered it may be served it again.

    A QC question is, in every generation the worker opens (a round skips only its own
    answers); a screening question never: each labeler gets each one once, and it joins no
    generation's questions.
    """
    return _not_screening()


def rates_a_step(label_id: SQLColumnExpression[int]) -> ColumnElement[bool]:
    """Whether the label rates at least one step: what a gold label needs."""
    return exists().where(StepCompletion.label_id == label_id, StepCompletion.rating.is_not(None))


def mark_quality_control(session: Session, solution_id: int, label_id: int) -> GoldLabel:
    """Make ``label_id`` the gold label of ``solution_id``; it is then served to everyone.

    Raises LookupError for an unknown solution or label, ValueError for a label of
    another solution or one that rates no step (a give-up or bad problem at once): every
    answer would be checked against a key that holds nothing to agree with.
    """
    if session.get(Solution, solution_id) is None:
        raise LookupError(f"there is no solution {solution_id}")
    label = session.get(Label, label_id)
    if label is None:
        raise LookupError(f"there is no label {label_id}")
    if label.solution_id != solution_id:
        raise ValueError(f"label {label_id} is not a label of solution {solution_id}")
    if not session.execute(select(rates_a_step(Label.id)).where(Label.id == label_id)).scalar():
        raise ValueError(
            f"label {label_id} rates no step: a gold label needs ratings to check answers by"
        )
    gold = session.get(GoldLabel, solution_id)
    if gold is None:
        gold = GoldLabel(solution_id=solution_id, label_id=label_id)
        session.add(gold)
        session.flush()
        newest = session.scalar(select(func.max(GenerationQualityControl.generation)))
        if newest is not None and _regular(session, solution_id):
            session.add(GenerationQualityControl(generation=newest, solution_id=solution_id))
    else:
        gold.label_id = label_id
    session.flush()
    return gold


def unmark_quality_control(session: Session, solution_id: int) -> None:
    """Stop serving the question (its generations lose it too; answers already given stay)."""
    gold = session.get(GoldLabel, solution_id)
    if gold is None:
        raise LookupError(f"solution {solution_id} is not a quality-control question")
    session.delete(gold)
    session.flush()


def set_gold(session: Session, actor: User | None, solution_id: int, label_id: int) -> GoldLabel:
    """``mark_quality_control``, recorded in the audit log (the gold label before, after)."""
    before = session.get(GoldLabel, solution_id)
    was = None if before is None else before.label_id
    gold = mark_quality_control(session, solution_id, label_id)
    target = f"solution {solution_id}"
    audit.record(session, actor, "qc.gold", target, {"gold_label": was}, {"gold_label": label_id})
    return gold


def remove_gold(session: Session, actor: User | None, solution_id: int) -> None:
    """``unmark_quality_control``, recorded in the audit log."""
    gold = session.get(GoldLabel, solution_id)
    was = None if gold is None else gold.label_id
    unmark_quality_control(session, solution_id)
    audit.record(session, actor, "qc.remove", f"solution {solution_id}", {"gold_label": was}, None)


def add_quality_control_to_generation(session: Session, generation: int) -> int:
    """Add every QC question (screening ones aside) to ``generation``; returns how many."""
    solution_ids = session.scalars(
        select(GoldLabel.solution_id)
        .join(Solution, Solution.id == GoldLabel.solution_id)
        .where(_not_screening())
        .order_by(GoldLabel.solution_id)
    ).all()
    session.add_all(
        GenerationQualityControl(generation=generation, solution_id=solution_id)
        for solution_id in solution_ids
    )
    session.flush()
    return len(solution_ids)


def _not_screening() -> ColumnElement[bool]:
    # Screening questions' gold labels score newcomers; they are not served again as QC.
    return func.coalesce(Solution.generation, 0) != SCREENING_GENERATION


def _regular(session: Session, solution_id: int) -> bool:
    return bool(session.scalar(select(_not_screening()).where(Solution.id == solution_id)))
