"""checkpoint retention: pinned runs and the size of each checkpoint

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25 01:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("training_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("checkpoint_bytes", sa.BigInteger(), nullable=True))
        batch_op.add_column(
            sa.Column("pinned", sa.Boolean(), server_default=sa.false(), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("training_runs", schema=None) as batch_op:
        batch_op.drop_column("pinned")
        batch_op.drop_column("checkpoint_bytes")
