"""login throttles: attempt counters with backoff instead of a log of failures

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 08:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # The failures only mattered for 15 minutes: nothing worth carrying over.
    with op.batch_alter_table("login_failures", schema=None) as batch_op:
        batch_op.drop_index("ix_login_failures_name_at")
        batch_op.drop_index(batch_op.f("ix_login_failures_address"))
    op.drop_table("login_failures")
    op.create_table(
        "login_throttles",
        sa.Column("name", sa.String(length=120), nullable=False),
        sa.Column("address", sa.String(length=64), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_attempt_at", sa.DateTime(), nullable=False),
        sa.Column("blocked_until", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("name", "address", name=op.f("pk_login_throttles")),
    )
    with op.batch_alter_table("login_throttles", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_login_throttles_last_attempt_at"), ["last_attempt_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("login_throttles", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_login_throttles_last_attempt_at"))
    op.drop_table("login_throttles")
    op.create_table(
        "login_failures",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=120), nullable=False),
        sa.Column("address", sa.String(length=64), nullable=False),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_login_failures")),
    )
    with op.batch_alter_table("login_failures", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_login_failures_address"), ["address"], unique=False)
        batch_op.create_index("ix_login_failures_name_at", ["name", "at"], unique=False)
