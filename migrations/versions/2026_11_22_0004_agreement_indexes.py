"""agreement indexes: own-step ratings and flagged completions

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 21:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_step_completions_own_rating",
        "step_completions",
        ["label_id", "step_index", "rating"],
        postgresql_where=sa.text("completion_index = 0"),
        sqlite_where=sa.text("completion_index = 0"),
    )
    op.create_index(
        "ix_step_completions_flagged",
        "step_completions",
        ["label_id"],
        postgresql_where=sa.text("flagged IS TRUE"),
        sqlite_where=sa.text("flagged IS 1"),
    )


def downgrade() -> None:
    op.drop_index("ix_step_completions_flagged", table_name="step_completions")
    op.drop_index("ix_step_completions_own_rating", table_name="step_completions")
