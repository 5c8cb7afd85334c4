"""control share: solutions queued as a generation's uniform control share, and their count

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26 12:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "solutions",
        sa.Column("is_control", sa.Boolean(), server_default=sa.false(), nullable=False),
    )
    op.add_column(
        "generations",
        sa.Column("control", sa.Integer(), server_default=sa.text("0"), nullable=False),
    )


def downgrade() -> None:
    # In place, not through batch mode: rebuilding ``solutions`` on SQLite fails while labels
    # refer to its rows (SQLite drops a plain column in place since 3.35).
    op.drop_column("generations", "control")
    op.drop_column("solutions", "is_control")
