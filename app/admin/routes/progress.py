"""The Progress screen: how far labeling has come."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from app.admin import dashboard, progress
from app.core.db import DbSession

pages = APIRouter()
api = APIRouter()


@pages.get("/progress", response_class=HTMLResponse)
def progress_page(request: Request, session: DbSession) -> HTMLResponse:
    context = {"section": "progress", "progress": _progress(session)}
    return dashboard.live_page(request, "admin/progress.html", context, "figures")


@api.get("/progress")
def progress_api(session: DbSession) -> progress.Progress:
    return _progress(session)


def _progress(session: Session) -> progress.Progress:
    return progress.progress(session, dashboard.default_overlap(session))
