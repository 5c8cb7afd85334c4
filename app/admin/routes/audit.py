"""The audit log's page: who changed what, newest first, with filters (app/audit.py)."""

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from app import audit
from app.admin.dashboard import Page, live_page
from app.core.db import DbSession
from app.inputs import Text

pages = APIRouter()


AUDIT_TEXT_MAX = 120


@pages.get("/audit", response_class=HTMLResponse)
def audit_log_page(
    request: Request,
    session: DbSession,
    action: Annotated[Text, Query(max_length=AUDIT_TEXT_MAX)] = "",
    actor: Annotated[Text, Query(max_length=AUDIT_TEXT_MAX)] = "",
    target: Annotated[Text, Query(max_length=AUDIT_TEXT_MAX)] = "",
    since: Annotated[Text, Query(max_length=AUDIT_TEXT_MAX)] = "",
    page: Page = 1,
) -> HTMLResponse:
    """Who changed what, newest first, filtered by action, admin, target and date."""
    error = None
    try:
        start = _day(since)
    except ValueError:
        start, error = None, f"since: give a date as 2026-11-28, not {since.strip()!r}"
    chosen = audit.AuditFilter(
        action=action.strip() or None,
        actor=actor.strip() or None,
        target=target.strip() or None,
        since=start,
    )
    context = {
        "section": "audit",
        "log": audit.audit_page(session, chosen, page),
        "actions": audit.ACTIONS,
        "since": since.strip(),
        "error": error,
    }
    return live_page(request, "admin/audit.html", context, "audit_table")


def _day(text: str) -> datetime | None:
    """A form's date (2026-11-28, or a full ISO time) as the start of that moment, in UTC."""
    text = text.strip()
    if not text:
        return None
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is not None:  # the log keeps naive UTC
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment
