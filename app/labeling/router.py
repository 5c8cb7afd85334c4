"""The labeler's pages: the next task, submitting it, my work and the guidelines."""

from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse

from app.auth import CurrentAdmin, CurrentUser, check_csrf
from app.config import get_settings
from app.db import DbSession
from app.labeling import service
from app.labeling.queue import extend_lease, next_assignment
from app.labeling.submission import SubmissionError, SubmissionInput, save_label
from app.models import Assignment
from app.templating import render, wants_fragment

router = APIRouter(dependencies=[Depends(check_csrf)])


def own_assignment(assignment_id: int, user: CurrentUser, session: DbSession) -> Assignment:
    """Dependency: the user's own task; 404 for anyone else's, so ids reveal nothing."""
    assignment = session.get(Assignment, assignment_id)
    if assignment is None or assignment.labeler_id != user.id:
        raise HTTPException(404, "There is no such task of yours.")
    return assignment


OwnAssignment = Annotated[Assignment, Depends(own_assignment)]


@router.get("/label/next", response_class=HTMLResponse)
def next_task(request: Request, user: CurrentUser, session: DbSession) -> HTMLResponse:
    """The labeler's home: their current task or a new one (a fragment for htmx)."""
    settings = get_settings()
    assignment = next_assignment(session, user, service.queue_rules(session, settings))
    context = {
        "task": service.task_view(session, assignment) if assignment else None,
        "waiting_for_approval": assignment is None and not user.is_approved,
    }
    block = "task" if wants_fragment(request) else None
    return render(request, "label.html", context, block=block)


@router.post("/api/tasks/{assignment_id}/label")
def submit_label(
    assignment: OwnAssignment, user: CurrentUser, session: DbSession, body: SubmissionInput
) -> JSONResponse:
    """Store the task's label; repeating the request stores nothing more."""
    rules = service.queue_rules(session, get_settings())
    try:
        saved = save_label(session, assignment, user, body, overlap=rules.overlap)
    except SubmissionError as error:
        raise HTTPException(422, str(error)) from None
    return JSONResponse({"label_id": saved.label_id, "created": saved.created})


@router.post("/api/tasks/{assignment_id}/heartbeat", status_code=204)
def heartbeat(assignment: OwnAssignment, session: DbSession) -> Response:
    """Keep the lease while the labeler's page is open."""
    rules = service.queue_rules(session, get_settings())
    if not extend_lease(session, assignment, rules):
        raise HTTPException(409, "This task is finished or no longer yours.")
    return Response(status_code=204)


@router.get("/me", response_class=HTMLResponse)
def my_work(request: Request, user: CurrentUser, session: DbSession) -> HTMLResponse:
    return render(request, "me.html", {"work": service.my_work(session, user)})


@router.get("/guidelines", response_class=HTMLResponse)
def guidelines(request: Request, user: CurrentUser, session: DbSession) -> HTMLResponse:
    return render(request, "guidelines.html", {"guidelines": service.guidelines(session)})


@router.get("/admin/guidelines", response_class=HTMLResponse)
def edit_guidelines(request: Request, admin: CurrentAdmin, session: DbSession) -> HTMLResponse:
    context = {"guidelines": service.guidelines(session)}
    return render(request, "guidelines_edit.html", context)


@router.post("/admin/guidelines", response_model=None)
def save_guidelines(
    admin: CurrentAdmin,
    session: DbSession,
    text: Annotated[str, Form(max_length=100_000)],
) -> RedirectResponse:
    service.save_guidelines(session, text)
    return RedirectResponse("/guidelines", status_code=303)
