"""stored PRM800K text: each label's ``label`` and each solution's ``question`` as JSON text

A pull copies them instead of reading every step's rows and encoding them (issue 40).
Existing rows keep null, and their lines are built from the rows when pulled.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28 14:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("labels", sa.Column("prm800k_label", sa.Text(), nullable=True))
    op.add_column("solutions", sa.Column("prm800k_question", sa.Text(), nullable=True))


def downgrade() -> None:
    # In place (SQLite 3.35+), as 0013: rebuilding the tables would meet their references.
    op.drop_column("solutions", "prm800k_question")
    op.drop_column("labels", "prm800k_label")
