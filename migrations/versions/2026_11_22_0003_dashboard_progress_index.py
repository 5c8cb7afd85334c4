"""the dashboard's progress index on solutions

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 22:05:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Progress per generation sums overlap and completed_count per (generation, queue
    # state): with all four in the index, it never reads the wide solution rows.
    with op.batch_alter_table("solutions", schema=None) as batch_op:
        batch_op.create_index(
            "ix_solutions_progress",
            ["generation", "queue_state", "overlap", "completed_count"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("solutions", schema=None) as batch_op:
        batch_op.drop_index("ix_solutions_progress")
