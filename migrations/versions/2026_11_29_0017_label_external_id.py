"""a label's own external_id, for an imported line that names no solution (phase 1)

A phase-1 line carries no pre-generated solution, so an exported one's ``external_id`` had
nowhere to go on import and the next export lost it. Labels of a solution keep showing
their solution's id; existing rows keep null.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-29 17:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("labels", sa.Column("source_id", sa.String(length=255), nullable=True))


def downgrade() -> None:
    # In place (SQLite 3.35+), as 0013: rebuilding the table would meet its references.
    op.drop_column("labels", "source_id")
