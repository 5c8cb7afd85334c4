"""revoke the live API tokens of deactivated users

Deactivation now revokes a user's tokens (app/auth/users.py ``deactivate``); before, it only
refused them while the user was inactive, and reactivating the user brought them back. This
revokes the tokens that users deactivated before then still hold, so that reactivating one
of them brings back none. The audit log gets no entry for them: the migration is no admin.
Downgrade leaves them revoked (there is no telling them from tokens revoked by hand).

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-30 00:20:00.000000
"""

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    tokens = sa.table(
        "api_tokens", sa.column("user_id", sa.Integer), sa.column("revoked_at", sa.DateTime)
    )
    users = sa.table("users", sa.column("id", sa.Integer), sa.column("is_active", sa.Boolean))
    inactive = sa.select(users.c.id).where(users.c.is_active.is_(False))
    # Naive UTC, as the models store every time (app.models.utc_now).
    now = datetime.now(UTC).replace(tzinfo=None)
    op.execute(
        tokens.update()
        .where(tokens.c.revoked_at.is_(None), tokens.c.user_id.in_(inactive))
        .values(revoked_at=now)
    )


def downgrade() -> None:
    pass
