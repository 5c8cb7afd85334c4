"""Pull cursors: a position in the stream of labels that never skips or repeats one, even
while labels are being written.

A label id alone would skip labels on Postgres: ids come from a sequence when a label is
inserted, not when its transaction commits, so a pull can see label 101 (committed) while
label 100 is still in flight, move its cursor past 100, and never see it. So on Postgres the
position is ``labels.written_xid``, the 64-bit id of the transaction that wrote the label,
and a pull reads only up to the horizon ``pg_snapshot_xmin(pg_current_snapshot())``: every
transaction below it has finished (committed or rolled back), and every transaction that
writes later gets a larger id. The labels below the horizon are therefore final, and the
next pull starts at the horizon. A label shows up once every transaction that began before
it has ended: a long import (one transaction) holds later labels back until it commits.

SQLite has one writer at a time, which takes the next id only once the writer before it
has committed: ids are in commit order, and the position is the id. The horizon is one past
the largest committed id. (Labels are never deleted, so an id is never handed out twice.)

A cursor names its kind (``xid-N``, ``id-N``): one from the other database is refused.
"""

from dataclasses import dataclass

from sqlalchemy import ColumnElement, and_, func, or_, select, text
from sqlalchemy.orm import Session

from app.models import LABELS

POSTGRES_KIND = "xid"
SQLITE_KIND = "id"
_HORIZON = text("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")


class CursorError(ValueError):
    """A cursor that this server did not make."""


@dataclass(frozen=True)
class PullWindow:
    """The labels at positions ``low`` (inclusive; None: from the start) to ``high``
    (exclusive); ``next_cursor`` is where the next pull starts."""

    kind: str
    low: int | None
    high: int

    @property
    def next_cursor(self) -> str:
        return f"{self.kind}-{self.high}"

    def condition(self) -> ColumnElement[bool]:
        position: ColumnElement[int] = (
            LABELS.c.written_xid if self.kind == POSTGRES_KIND else LABELS.c.id
        )
        below = position < self.high
        if self.low is not None:
            return and_(position >= self.low, below)
        if self.kind == POSTGRES_KIND:
            # Labels stored before the column existed have none: they come first.
            return or_(below, position.is_(None))
        return below


def cursor_kind(session: Session) -> str:
    return POSTGRES_KIND if session.get_bind().dialect.name == "postgresql" else SQLITE_KIND


def parse_cursor(cursor: str, kind: str) -> int:
    """The position in ``cursor``; CursorError if it is not one of ``kind``'s."""
    found, _, number = cursor.strip().partition("-")
    if found not in (POSTGRES_KIND, SQLITE_KIND) or not number.isdigit() or len(number) > 19:
        raise CursorError(
            f"{cursor[:40]!r} is not a cursor: pass the value the last pull printed "
            "(like 'id-1234' or 'xid-5678')"
        )
    if found != kind:
        database = "Postgres" if found == POSTGRES_KIND else "SQLite"
        raise CursorError(
            f"this cursor was made by a server on {database}, not this one: pull without "
            "--since once to start again"
        )
    return int(number)


def pull_window(session: Session, since: str | None) -> PullWindow:
    """The window a pull reads now: from ``since`` (a cursor; None: the start) to the
    horizon. Labels inside it are committed and final (see the module's docstring)."""
    kind = cursor_kind(session)
    low = None if since is None else parse_cursor(since, kind)
    if kind == POSTGRES_KIND:
        high = int(session.scalar(_HORIZON) or 0)
    else:
        high = int(session.scalar(select(func.coalesce(func.max(LABELS.c.id), 0))) or 0) + 1
        if low is not None and low > high:
            # Labels are never deleted: the labels it counted are gone, a backup put back in
            # their place, and the next labels take their ids, which this cursor would skip.
            raise CursorError(
                f"this cursor is past the newest label here ({kind}-{high}): the database "
                "was restored from an older backup since; pull once without --since"
            )
    # Postgres: a cursor from a later horizon (a clock never goes back, but be safe) gives
    # an empty window.
    return PullWindow(kind, low, high if low is None else max(high, low))
