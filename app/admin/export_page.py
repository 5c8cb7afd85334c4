"""The admin's Export page: the labels as a download, streamed, in the formats and with the
filters of the API's pull (app/datasets/pull.py), which it shares."""

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, StreamingResponse
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth import check_csrf, current_admin
from app.datasets import pull
from app.db import DbSession
from app.inputs import GenerationNumber
from app.models import Label, User, utc_now
from app.templating import render

router = APIRouter(prefix="/admin", dependencies=[Depends(current_admin), Depends(check_csrf)])

FORMAT_TITLES = {
    "prm800k": "PRM800K JSONL (one line per label, the bytes steplabel export writes)",
    "trl": "TRL stepwise rows (prompt, completions, labels)",
}


@router.get("/export", response_class=HTMLResponse)
def export_page(request: Request, session: DbSession) -> HTMLResponse:
    return render(request, "admin/export.html", _context(session))


def _context(session: Session) -> dict[str, Any]:
    generations = session.scalars(
        select(Label.generation).where(Label.generation.is_not(None)).distinct()
    ).all()
    labelers = session.scalars(
        select(User.name).where(User.id.in_(select(Label.labeler_id))).order_by(User.name)
    ).all()
    return {
        "section": "export",
        "formats": FORMAT_TITLES,
        "generations": sorted(generations),
        "labelers": labelers,
    }


@router.get("/export/download", response_class=StreamingResponse)
def export_download(
    session: DbSession,
    format: Literal["prm800k", "trl"] = "prm800k",
    generation: Annotated[list[GenerationNumber] | None, Query()] = None,
    labeler: Annotated[list[str] | None, Query()] = None,
    since: Annotated[str | None, Query(max_length=64)] = None,
    consensus: bool = False,
    exclude_qc: bool = False,
    exclude_screening: bool = False,
) -> StreamingResponse:
    """The labels as a file, streamed; its name ends with the cursor of the next pull."""
    try:
        planned = pull.plan_pull(
            session,
            export_format=format,
            since=(since or "").strip() or None,  # the form sends an empty field
            generations=generation or (),
            labelers=labeler or (),
            consensus=consensus,
            include_quality_control=not exclude_qc,
            include_screening=not exclude_screening,
        )
    except pull.PullError as error:
        raise HTTPException(400, f"{error}.") from None
    name = f"labels-{format}-{utc_now():%Y%m%dT%H%M%SZ}-next-{planned.next_cursor}.jsonl"
    headers = {"Content-Disposition": f'attachment; filename="{name}"', **planned.headers()}
    return StreamingResponse(planned.lines(), media_type="application/x-ndjson", headers=headers)
