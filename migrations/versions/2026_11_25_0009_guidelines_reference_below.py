"""guidelines: the reference answer is below the problem, not above

The first default guidelines said the reference answer was "above the problem"; the
labeling page shows it below. A project whose admin saved the guidelines keeps that
wording in project_settings, where a new default never reaches: mend the sentence there,
leaving the rest of the admin's text as it is.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25 09:00:00.000000
"""

import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The old sentence, however an admin's editor wrapped it.
OLD_WORDING = re.compile(r"reference(\s+)answer\s+above\s+the\s+problem\s+is")
NEW_WORDING = r"reference\1answer, below the problem, is"
SETTINGS = sa.table("project_settings", sa.column("key", sa.String), sa.column("value", sa.JSON))


def upgrade() -> None:
    connection = op.get_bind()
    stored = connection.execute(
        sa.select(SETTINGS.c.value).where(SETTINGS.c.key == "guidelines")
    ).scalar()
    if not isinstance(stored, str):
        return
    mended = OLD_WORDING.sub(NEW_WORDING, stored)
    if mended != stored:
        connection.execute(
            SETTINGS.update().where(SETTINGS.c.key == "guidelines").values(value=mended)
        )


def downgrade() -> None:
    # Nothing to undo in the schema; the old sentence was wrong, so it stays mended.
    pass
