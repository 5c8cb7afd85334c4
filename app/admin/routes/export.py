"""The admin's Export page: the labels as a download, streamed, in the formats and with the
filters of the API's pull (app/datasets/pull.py), which it shares."""

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, StreamingResponse
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.db import DbSession
from app.datasets import pull
from app.models import Label, User, utc_now
from app.pull_options import PullOptions
from app.templating import render

pages = APIRouter()

FORMAT_TITLES = {
    "prm800k": "PRM800K JSONL (one line per label, the bytes steplabel export writes)",
    "trl": "TRL stepwise rows (prompt, completions, labels)",
}


@pages.get("/export", response_class=HTMLResponse)
def export_page(request: Request, session: DbSession) -> HTMLResponse:
    return render(request, "admin/export.html", _context(session))


def _context(session: Session) -> dict[str, Any]:
    generations = session.scalars(select(Label.generation).distinct()).all()
    labelers = session.scalars(
        select(User.name).where(User.id.in_(select(Label.labeler_id))).order_by(User.name)
    ).all()
    return {
        "section": "export",
        "formats": FORMAT_TITLES,
        "generations": sorted(g for g in generations if g is not None),
        "unnumbered": None in generations,
        "labelers": labelers,
    }


@pages.get("/export/download", response_class=StreamingResponse)
def export_download(
    session: DbSession, options: Annotated[PullOptions, Query()]
) -> StreamingResponse:
    """The labels as a file, streamed; its name ends with the cursor of the next pull."""
    try:
        planned = pull.plan_pull(session, options)
    except pull.PullError as error:
        raise HTTPException(400, f"{error}.") from None
    name = f"labels-{options.format}-{utc_now():%Y%m%dT%H%M%SZ}-next-{planned.next_cursor}.jsonl"
    headers = {"Content-Disposition": f'attachment; filename="{name}"', **planned.headers()}
    return StreamingResponse(planned.lines(), media_type="application/x-ndjson", headers=headers)
