"""What every figure of labeling work shares, on the dashboard and in quality control.

- ``by_labelers``: labels made by labelers, not admins: labeler statistics leave out an
  admin's labels (gold labels, trying the queue), which are not labeling work.
- ``regular_label_conditions``: the labels agreement and consensus count (labeling work,
  not QC or screening answers, not labels of a QC solution);
- ``newest_first`` and ``counted_labels`` (``counted_label_rows``): of those, each
  labeler's latest on a solution, the one label of theirs that agreement (the Agreement
  page, /me) and consensus count;
- ``share``: a part of a whole, or None where the whole is empty (never a made-up 0).
"""

from typing import Any

from sqlalchemy import ColumnElement, Select, SQLColumnExpression, Subquery, exists, func, select
from sqlalchemy.orm import aliased

from app.models import UNNUMBERED_GENERATION, GoldLabel, Label, Role, User

COUNTED_COLUMNS = (
    Label.id,
    Label.labeler_id,
    Label.solution_id,
    Label.generation,
    Label.finish_reason,
)


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


def newest_first() -> ColumnElement[int]:
    """1 for each labeler's latest label on a solution (then 2, 3, ... going back)."""
    return func.row_number().over(
        partition_by=(Label.solution_id, Label.labeler_id),
        order_by=(Label.timestamp.desc(), Label.id.desc()),
    )


def counted_labels(
    generation: int | None, solution_id: int | None = None, labeler_id: int | None = None
) -> Subquery:
    """The labels agreement is computed on (``COUNTED_COLUMNS``): the latest regular label of
    each labeler, on solutions that two or more distinct labelers labeled; only the one
    solution's, or only on solutions that ``labeler_id`` labeled, where given."""
    return counted_label_rows(generation, solution_id, labeler_id).subquery()


def counted_label_rows(
    generation: int | None, solution_id: int | None = None, labeler_id: int | None = None
) -> Select[Any]:
    """``counted_labels`` as a statement, for a caller that names it (a CTE read twice)."""
    regular = [Label.solution_id.is_not(None), *regular_label_conditions(generation)]
    if solution_id is not None:
        regular.append(Label.solution_id == solution_id)
    if labeler_id is not None:
        theirs = aliased(Label)
        regular.append(
            Label.solution_id.in_(select(theirs.solution_id).where(theirs.labeler_id == labeler_id))
        )
    # min < max: two or more distinct labelers, without count(DISTINCT)'s sort.
    shared = (
        select(Label.solution_id)
        .where(*regular)
        .group_by(Label.solution_id)
        .having(func.min(Label.labeler_id) < func.max(Label.labeler_id))
    )
    ranked = (
        select(*COUNTED_COLUMNS, newest_first().label("newest_first"))
        .where(*regular, Label.solution_id.in_(shared))
        .subquery()
    )
    columns = [ranked.c[column.key] for column in COUNTED_COLUMNS]
    return select(*columns).where(ranked.c.newest_first == 1)


def share(part: int, whole: int) -> float | None:
    """``part / whole``; None for an empty whole."""
    return part / whole if whole else None
