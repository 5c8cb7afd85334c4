"""The admin dashboard's pages and its JSON API: one routes module per screen
(app/admin/routes/), included here behind the admin check. Every route is for admins only."""

from fastapi import APIRouter, Depends

from app.admin.routes import (
    agreement,
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

# In the order the sidebar lists them; Notes, Users and Imports have pages only.
for screen in (overview, agreement, progress, throughput, qc, notes, users, imports, prm):
    # The prefix here, not on the outer router: the overview's path is the prefix alone.
    pages.include_router(screen.pages, prefix="/admin")
for screen in (overview, agreement, progress, throughput, qc, prm):
    api.include_router(screen.api, prefix="/api/admin")
