"""The Notes screen: labelers' give-up and bad-problem notes, and their download."""

import io
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from app.admin import dashboard, notes
from app.core.db import DbSession
from app.datasets.export import ExportFilter
from app.models import utc_now

pages = APIRouter()


NoteReason = Annotated[
    Literal["give_up", "bad_problem"] | None,
    Query(description="Only notes of this finish reason."),
]


@pages.get("/notes", response_class=HTMLResponse)
def notes_page(
    request: Request, session: DbSession, reason: NoteReason = None, page: dashboard.Page = 1
) -> HTMLResponse:
    context = {"section": "notes", "notes": notes.notes_page(session, reason, page)}
    return dashboard.live_page(request, "admin/notes.html", context, "note_table")


@pages.get("/notes.jsonl")
def notes_download(session: DbSession) -> Response:
    """Every give-up and bad-problem note as JSONL, a file beside the PRM800K export."""
    out = io.StringIO()
    notes.write_notes(session, out, ExportFilter())
    name = f"notes-{utc_now():%Y%m%dT%H%M%SZ}.jsonl"
    return Response(
        out.getvalue(),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )
