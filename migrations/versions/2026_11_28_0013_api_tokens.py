"""API tokens, and the position of each label for the API's pull cursor

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28 10:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The 64-bit transaction id (Postgres 13+), as a plain bigint for ordinary comparisons.
WRITTEN_XID_DEFAULT = "(pg_current_xact_id()::text::bigint)"


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=120), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("scopes", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("created_by_id", sa.Integer(), nullable=True),
        sa.Column("expires_at", sa.DateTime(), nullable=True),
        sa.Column("last_used_at", sa.DateTime(), nullable=True),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_api_tokens_user_id_users")
        ),
        sa.ForeignKeyConstraint(
            ["created_by_id"], ["users.id"], name=op.f("fk_api_tokens_created_by_id_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
    )
    op.create_index(op.f("ix_api_tokens_user_id"), "api_tokens", ["user_id"], unique=False)
    # Null for the labels already stored (no table rewrite): a pull counts them as written
    # before any cursor. Only Postgres fills it; SQLite's pulls go by the label's id.
    op.add_column("labels", sa.Column("written_xid", sa.BigInteger(), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE labels ALTER COLUMN written_xid SET DEFAULT {WRITTEN_XID_DEFAULT}")
    op.create_index(op.f("ix_labels_written_xid"), "labels", ["written_xid"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_labels_written_xid"), table_name="labels")
    # In place (SQLite 3.35+), as 0011: rebuilding ``labels`` would meet its references.
    op.drop_column("labels", "written_xid")
    op.drop_index(op.f("ix_api_tokens_user_id"), table_name="api_tokens")
    op.drop_table("api_tokens")
