"""The PRM screen: the process reward model's status, its training runs and their
checkpoints."""

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from app import audit, training
from app.admin import dashboard, prm
from app.auth.sessions import CurrentAdmin
from app.core.config import get_settings
from app.core.db import DbSession
from app.inputs import DbId
from app.models import TrainingRun, User

pages = APIRouter()
api = APIRouter()


@pages.get("/prm", response_class=HTMLResponse)
def prm_page(request: Request, session: DbSession) -> HTMLResponse:
    return dashboard.live_page(request, "admin/prm.html", _prm_context(session), "figures")


# By field name: the JSON API's keys, where the stored record has others (app/run_metrics.py).
@api.get("/prm", response_model_by_alias=False)
def prm_api(session: DbSession) -> prm.PrmStatus:
    return prm.prm_status(session, get_settings())


def _prm_context(session: Session) -> dict[str, Any]:
    status = prm.prm_status(session, get_settings())
    return {"section": "prm", "prm": status, "run_charts": prm.run_charts}


@pages.post("/prm/train", response_class=HTMLResponse)
def train_now(request: Request, session: DbSession, admin: CurrentAdmin) -> HTMLResponse:
    run = training.request_run(session, admin.id)
    audit.record(
        session, admin, "prm.train", f"training run {run.id}", None, {"status": run.status}
    )
    # The figures below say it waits: this line says only what the button did.
    message = f"Training run {run.id} requested."
    return _prm_answer(request, session, message=message)


def existing_run(run_id: DbId, session: DbSession) -> TrainingRun:
    """Dependency: the training run named in the path, or 404."""
    return dashboard.row_or_404(session, TrainingRun, run_id, "training run")


ExistingRun = Annotated[TrainingRun, Depends(existing_run)]


@pages.get("/prm/runs/{run_id}", response_class=HTMLResponse)
def run_page(request: Request, run: ExistingRun) -> HTMLResponse:
    context = {"section": "prm", "detail": prm.run_detail(run)}
    return dashboard.live_page(request, "admin/prm_run.html", context, "figures")


@api.get("/prm/runs/{run_id}", response_model_by_alias=False)
def run_api(run: ExistingRun) -> prm.RunDetail:
    return prm.run_detail(run)


@pages.post("/prm/runs/{run_id}/pin", response_class=HTMLResponse)
def pin_run(
    request: Request, session: DbSession, admin: CurrentAdmin, run: ExistingRun
) -> HTMLResponse:
    try:
        _set_pinned(session, admin, run, pinned=True)
    except ValueError as error:
        return _prm_answer(request, session, error=str(error))
    message = f"Run {run.id}'s checkpoint is pinned: it stays on disk until you unpin it."
    return _prm_answer(request, session, message=message)


@pages.post("/prm/runs/{run_id}/unpin", response_class=HTMLResponse)
def unpin_run(
    request: Request, session: DbSession, admin: CurrentAdmin, run: ExistingRun
) -> HTMLResponse:
    _set_pinned(session, admin, run, pinned=False)
    message = f"Run {run.id}'s checkpoint is unpinned: the retention setting applies to it."
    return _prm_answer(request, session, message=message)


def _set_pinned(session: Session, admin: User, run: TrainingRun, *, pinned: bool) -> None:
    before = run.pinned
    training.set_pinned(run, pinned=pinned)
    if before == pinned:
        return  # asked for what it was: nothing changed, nothing to record
    action = "prm.pin" if pinned else "prm.unpin"
    audit.record(
        session, admin, action, f"training run {run.id}", {"pinned": before}, {"pinned": pinned}
    )


def _prm_answer(
    request: Request, session: Session, *, message: str | None = None, error: str | None = None
) -> HTMLResponse:
    return dashboard.form_answer(
        request,
        "admin/prm.html",
        lambda: _prm_context(session),
        {"message": message, "error": error},
        failed=error is not None,
    )
