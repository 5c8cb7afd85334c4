"""The admin dashboard's pages and its JSON API: one routes module per screen
(app/admin/routes/), included here behind the admin check. Every route is for admins only."""

from fastapi import APIRouter, Depends

from app.admin.routes import (
    agreement,
    audit,
    data,
    export,
    guidelines,
    imports,
    notes,
    overview,
    prm,
    progress,
    qc,
    throughput,
    users,
)
from app.auth.sessions import current_admin
from app.core.csrf import check_csrf

# current_admin runs first, so a labeler's POST is refused as a labeler (403), not as CSRF.
pages = APIRouter(dependencies=[Depends(current_admin), Depends(check_csrf)])
api = APIRouter(dependencies=[Depends(current_admin), Depends(check_csrf)])

# The prefixes go on the screens' routers: the overview's path is the prefix alone, and an
# included router may not have both empty.
SCREENS = (
    overview,
    agreement,
    progress,
    throughput,
    qc,
    notes,
    users,
    imports,
    prm,
    export,
    audit,
    data,
    guidelines,
)
for screen in SCREENS:
    pages.include_router(screen.pages, prefix="/admin")
# Only these screens have a JSON API beside their pages.
for screen in (overview, agreement, progress, throughput, qc, prm):
    api.include_router(screen.api, prefix="/api/admin")
