"""labels: phase-1 labels made in the app carry no generation, as PRM800K's phase 1

Until now a label of a phase-1 task took its solution's generation (0 in the demo), so
the export wrote ``"generation": 0`` where every PRM800K phase-1 line has null, and the
Progress page counted those labels under generation 0. New labels are stored without one;
this clears it on the labels made before. Downgrade gives them back the generation they
had: the quality-control round they were served in, else their solution's.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26 09:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LABELS = sa.table(
    "labels", sa.column("id", sa.Integer), sa.column("solution_id", sa.Integer),
    sa.column("generation", sa.Integer),
)  # fmt: skip
SOLUTIONS = sa.table(
    "solutions", sa.column("id", sa.Integer), sa.column("style", sa.String),
    sa.column("generation", sa.Integer),
)  # fmt: skip
ASSIGNMENTS = sa.table(
    "assignments", sa.column("label_id", sa.Integer), sa.column("qc_generation", sa.Integer)
)
PHASE1_SOLUTIONS = sa.select(SOLUTIONS.c.id).where(SOLUTIONS.c.style == "phase1")


def upgrade() -> None:
    op.execute(
        LABELS.update().where(LABELS.c.solution_id.in_(PHASE1_SOLUTIONS)).values(generation=None)
    )


def downgrade() -> None:
    served_in = (
        sa.select(sa.func.coalesce(ASSIGNMENTS.c.qc_generation, SOLUTIONS.c.generation))
        .select_from(SOLUTIONS)
        .outerjoin(ASSIGNMENTS, ASSIGNMENTS.c.label_id == LABELS.c.id)
        .where(SOLUTIONS.c.id == LABELS.c.solution_id)
        .scalar_subquery()
    )
    op.execute(
        LABELS.update()
        .where(LABELS.c.solution_id.in_(PHASE1_SOLUTIONS))
        .values(generation=served_in)
    )
