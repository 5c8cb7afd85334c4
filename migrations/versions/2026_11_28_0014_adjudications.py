"""adjudications: an adjudicator's final ratings of a solution, who gave them and when

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28 10:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "adjudications",
        sa.Column("solution_id", sa.Integer(), nullable=False),
        sa.Column("ratings", sa.JSON(), nullable=False),
        sa.Column("source_label_id", sa.Integer(), nullable=True),
        sa.Column("adjudicator_id", sa.Integer(), nullable=False),
        sa.Column("decided_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["adjudicator_id"],
            ["users.id"],
            name=op.f("fk_adjudications_adjudicator_id_users"),
        ),
        sa.ForeignKeyConstraint(
            ["solution_id"],
            ["solutions.id"],
            name=op.f("fk_adjudications_solution_id_solutions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["source_label_id"],
            ["labels.id"],
            name=op.f("fk_adjudications_source_label_id_labels"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("solution_id", name=op.f("pk_adjudications")),
    )


def downgrade() -> None:
    op.drop_table("adjudications")
