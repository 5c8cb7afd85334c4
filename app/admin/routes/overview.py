"""The Overview screen: the project at a glance."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from app.admin import dashboard
from app.admin.overview import Overview, overview
from app.core.config import get_settings
from app.core.db import DbSession

pages = APIRouter()
api = APIRouter()


@pages.get("", response_class=HTMLResponse)
def overview_page(request: Request, session: DbSession) -> HTMLResponse:
    context = {"section": "overview", "overview": _overview(session)}
    return dashboard.live_page(request, "admin/overview.html", context, "figures")


@api.get("/overview")
def overview_api(session: DbSession) -> Overview:
    return _overview(session)


def _overview(session: Session) -> Overview:
    return overview(
        session,
        get_settings(),
        dashboard.default_overlap(session),
        dashboard.threshold(session),
        min_answers=dashboard.min_answers(session),
    )
