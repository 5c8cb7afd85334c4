"""The audit log: every admin action that changes data or access, with who, when, what and
the values before and after.

Code that makes such a change calls ``record`` with the session that makes it, after the
change succeeded: the entry then commits or rolls back with the change (one transaction),
so a change that fails leaves no entry and no change goes unrecorded. Labelers' own labels
are their record already and are not logged here.

    from app import audit
    audit.record(session, admin, "user.deactivate", f"user {user.name}",
                 before={"is_active": True}, after={"is_active": False})

``actor`` is the admin (a User) or None for the command line. ``action`` is
``thing.verb`` (the ACTIONS below list those in use; a new one needs no registration).
``before`` and ``after`` hold only what changed, as JSON values, never a secret: a new
password is written as ``{"password": "changed"}``.

The admin page (/admin/audit) lists the entries with filters, and ``steplabel export
--format audit`` writes them as JSONL.
"""

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TextIO

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from app.models import AuditEntry, User, utc_now

COMMAND_LINE = "command line"
"""The actor of what the `steplabel` command line changes."""

ACTIONS = {
    "user.create": "created a user",
    "user.approve": "approved a labeler",
    "user.deactivate": "deactivated a user",
    "user.reactivate": "reactivated a user",
    "user.end_sessions": "ended a user's sessions",
    "user.reset_password": "reset a password",
    "qc.settings": "changed QC and overlap settings",
    "qc.gold": "set a gold label",
    "qc.remove": "removed a QC question",
    "qc.sample": "sampled solutions for agreement",
    "import.queue": "uploaded a file to import",
    "import.push": "pushed a batch to import (API)",
    "import.run": "imported files (command line)",
    "guidelines.edit": "edited the guidelines",
    "prm.pin": "pinned a checkpoint",
    "prm.unpin": "unpinned a checkpoint",
    "prm.train": "requested a training run",
    "token.create": "created an API token",
    "token.revoke": "revoked an API token",
    "consensus.adjudicate": "adjudicated a solution's final label",
    "consensus.clear": "cleared a solution's adjudication",
}
"""The actions recorded today, with what the admin page calls them."""

ENTRIES_PER_PAGE = 50
TARGET_LENGTH = AuditEntry.target.type.length or 255


def record(
    session: Session,
    actor: User | None,
    action: str,
    target: str,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
) -> AuditEntry:
    """Log ``action`` on ``target`` by ``actor`` (None: the command line) in the session's
    transaction; call it once the change itself succeeded."""
    entry = AuditEntry(
        created_at=utc_now(),
        actor_id=None if actor is None else actor.id,
        actor=COMMAND_LINE if actor is None else actor.name,
        action=action,
        target=target[:TARGET_LENGTH],
        before=before,
        after=after,
    )
    session.add(entry)
    session.flush()  # a bad value fails here, with the change, not at commit
    return entry


@dataclass(frozen=True)
class AuditFilter:
    """Which entries to show; every field narrows, none set shows all."""

    action: str | None = None
    actor: str | None = None
    """An admin's name, or ``command line``."""
    target: str | None = None
    """Part of the target, any case."""
    since: datetime | None = None

    def query(self) -> Select[AuditEntry]:
        statement = select(AuditEntry)
        if self.action:
            statement = statement.where(AuditEntry.action == self.action)
        if self.actor:
            statement = statement.where(AuditEntry.actor == self.actor)
        if self.target:
            pattern = "%" + self.target.lower().replace("%", r"\%").replace("_", r"\_") + "%"
            statement = statement.where(func.lower(AuditEntry.target).like(pattern, escape="\\"))
        if self.since is not None:
            statement = statement.where(AuditEntry.created_at >= self.since)
        return statement


@dataclass(frozen=True)
class AuditPage:
    entries: list[AuditEntry]
    chosen: AuditFilter
    actors: list[str]
    """Everyone who has an entry, for the filter."""
    page: int
    page_count: int
    total: int


def audit_page(session: Session, chosen: AuditFilter, page: int = 1) -> AuditPage:
    """One page of the entries ``chosen`` picks, newest first."""
    statement = chosen.query()
    total = session.scalar(select(func.count()).select_from(statement.subquery())) or 0
    page_count = max(1, math.ceil(total / ENTRIES_PER_PAGE))
    page = min(page, page_count)
    entries = session.scalars(
        statement.order_by(AuditEntry.id.desc())
        .limit(ENTRIES_PER_PAGE)
        .offset((page - 1) * ENTRIES_PER_PAGE)
    ).all()
    actors = session.scalars(select(AuditEntry.actor).distinct().order_by(AuditEntry.actor)).all()
    return AuditPage(list(entries), chosen, list(actors), page, page_count, total)


def entry_record(entry: AuditEntry) -> dict[str, Any]:
    """The entry as the JSONL export writes it."""
    return {
        "id": entry.id,
        "timestamp": entry.created_at.isoformat(),
        "actor": entry.actor,
        "actor_id": entry.actor_id,
        "action": entry.action,
        "target": entry.target,
        "before": entry.before,
        "after": entry.after,
    }


def iter_entries(session: Session, chosen: AuditFilter) -> Iterator[AuditEntry]:
    """The entries ``chosen`` picks, oldest first, read in chunks."""
    yield from session.scalars(
        chosen.query().order_by(AuditEntry.id).execution_options(yield_per=1000)
    )


def write_audit(session: Session, stream: TextIO, chosen: AuditFilter) -> int:
    """The entries as JSONL, oldest first; returns how many."""
    written = 0
    for entry in iter_entries(session, chosen):
        stream.write(json.dumps(entry_record(entry), ensure_ascii=False) + "\n")
        written += 1
    return written
