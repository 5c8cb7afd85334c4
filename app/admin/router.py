"""The admin dashboard's pages and its JSON API. Every route here is for admins only."""

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from app.admin import agreement_router
from app.auth import check_csrf, current_admin
from app.templating import render

# current_admin runs first, so a labeler's POST is refused as a labeler (403), not as CSRF.
pages = APIRouter(prefix="/admin", dependencies=[Depends(current_admin), Depends(check_csrf)])
api = APIRouter(prefix="/api/admin", dependencies=[Depends(current_admin), Depends(check_csrf)])
pages.include_router(agreement_router.pages)
api.include_router(agreement_router.api)


@pages.get("", response_class=HTMLResponse)
def overview(request: Request) -> HTMLResponse:
    return render(request, "admin/overview.html", {"section": "overview"})
