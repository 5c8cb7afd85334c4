"""quality-control questions per generation

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 22:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ONE_PER_LABELER = "uq_assignments_solution_id_labeler_id"
ONE_PER_ROUND = "uq_assignments_quality_control_round"


def upgrade() -> None:
    op.create_table(
        "generation_quality_control",
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("solution_id", sa.Integer(), nullable=False),
        sa.Column("added_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["solution_id"],
            ["gold_labels.solution_id"],
            name=op.f("fk_generation_quality_control_solution_id_gold_labels"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "generation", "solution_id", name=op.f("pk_generation_quality_control")
        ),
    )
    with op.batch_alter_table("generations") as batch_op:
        batch_op.add_column(
            sa.Column("quality_control", sa.Integer(), nullable=False, server_default="0")
        )
    with op.batch_alter_table("generations") as batch_op:
        batch_op.alter_column("quality_control", server_default=None)
    with op.batch_alter_table("assignments") as batch_op:
        batch_op.add_column(sa.Column("qc_generation", sa.Integer(), nullable=True))
        batch_op.drop_constraint(ONE_PER_LABELER, type_="unique")
    # Outside the batch: SQLite's table rebuild would not keep the partial indexes' WHERE.
    no_round = sa.text("qc_generation IS NULL")
    a_round = sa.text("qc_generation IS NOT NULL")
    op.create_index(
        ONE_PER_LABELER,
        "assignments",
        ["solution_id", "labeler_id"],
        unique=True,
        postgresql_where=no_round,
        sqlite_where=no_round,
    )
    op.create_index(
        ONE_PER_ROUND,
        "assignments",
        ["solution_id", "labeler_id", "qc_generation"],
        unique=True,
        postgresql_where=a_round,
        sqlite_where=a_round,
    )


def downgrade() -> None:
    op.drop_index(ONE_PER_ROUND, table_name="assignments")
    op.drop_index(ONE_PER_LABELER, table_name="assignments")
    # A labeler may hold one solution twice now (two generations' QC): keep the first.
    op.execute(
        "DELETE FROM assignments WHERE qc_generation IS NOT NULL AND id NOT IN ("
        "SELECT min(id) FROM assignments GROUP BY solution_id, labeler_id)"
    )
    with op.batch_alter_table("assignments") as batch_op:
        batch_op.drop_column("qc_generation")
        batch_op.create_unique_constraint(ONE_PER_LABELER, ["solution_id", "labeler_id"])
    with op.batch_alter_table("generations") as batch_op:
        batch_op.drop_column("quality_control")
    op.drop_table("generation_quality_control")
