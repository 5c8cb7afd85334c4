"""stored PRM800K text compressed with lz4 on Postgres, in place of pglz

A pull reads every selected label's stored text (migration 0015), and on Postgres the
server's decompression of it was most of what the pull spent beyond SQLite (issue 40);
lz4 decompresses several times faster than pglz. Only values written from now on are
compressed so: existing ones keep pglz until rewritten (`steplabel migrate` rewrites
none), which reads as before. No-op on SQLite, and on a server built without lz4.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28 17:20:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STORED_TEXT = (("labels", "prm800k_label"), ("solutions", "prm800k_question"))


def _lz4_available() -> bool:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return False
    # Postgres 14+ built with lz4 offers it as a value of this setting.
    values = bind.exec_driver_sql(
        "SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'"
    ).scalar()
    return values is not None and "lz4" in values


def _set_compression(method: str) -> None:
    for table, column in STORED_TEXT:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION {method}")


def upgrade() -> None:
    if _lz4_available():
        _set_compression("lz4")


def downgrade() -> None:
    if _lz4_available():
        # The server's default again (pglz unless configured otherwise).
        _set_compression("default")
