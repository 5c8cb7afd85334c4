"""The labeler's pages: the next task, submitting it, my work and the guidelines."""

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse

from app.auth.sessions import CurrentUser, LoggedIn, login_of
from app.core.config import get_settings
from app.core.csrf import check_csrf
from app.core.db import DbSession, in_database_thread
from app.inputs import DbId, PageNumber, StrictJsonRoute
from app.labeling import history, service
from app.labeling.submission import (
    HUMAN_STEP_MAX_CHARS,
    NOTE_MAX_CHARS,
    LeaseLost,
    SubmissionError,
    SubmissionInput,
)
from app.models import utc_now
from app.project_settings import runtime_settings
from app.templating import render, wants_fragment

# The login first, as the admin routers do: a request whose session has ended (logged out
# in another tab, the cookie gone) has no CSRF token left either, and must get the 401 that
# sends the page to the login form (keeping its draft), not the CSRF check's 403, "reload
# the page", which reloads onto the login form and loses the submit. A logged-in request
# with a wrong token still gets the 403. No database work: ``login_of`` reads the cookie.
router = APIRouter(
    dependencies=[Depends(login_of), Depends(check_csrf)], route_class=StrictJsonRoute
)

# The three labeling requests below come with every task a labeler does: each runs its
# service's whole unit of work in one database thread (app/labeling/service.py).


@router.get("/label/next", response_class=HTMLResponse)
async def next_task(request: Request, login: LoggedIn) -> HTMLResponse:
    """The labeler's home: their current task or a new one (a fragment for htmx)."""
    viewer, task = await in_database_thread(service.take_next_task, login)
    request.state.viewer = viewer
    waiting = task is None and not viewer.is_approved
    context = {
        "task": task,
        "waiting_for_approval": waiting,
        "screened": waiting and await in_database_thread(service.had_screening, login),
        "note_max_chars": NOTE_MAX_CHARS,
        "human_step_max_chars": HUMAN_STEP_MAX_CHARS,
    }
    block = "task" if wants_fragment(request) else None
    return render(request, "label.html", context, block=block)


@router.post("/api/tasks/{assignment_id}/label")
async def submit_label(assignment_id: DbId, login: LoggedIn, body: SubmissionInput) -> JSONResponse:
    """Store the task's label; repeating the request stores nothing more."""
    try:
        saved = await in_database_thread(service.submit, login, assignment_id, body)
    except LeaseLost as error:
        raise HTTPException(409, str(error)) from None
    except SubmissionError as error:
        raise HTTPException(422, str(error)) from None
    return JSONResponse({"label_id": saved.label_id, "created": saved.created})


@router.post("/api/tasks/{assignment_id}/heartbeat", status_code=204)
async def heartbeat(assignment_id: DbId, login: LoggedIn) -> Response:
    """Keep the lease while the labeler's page is open."""
    await in_database_thread(service.keep_lease, login, assignment_id)
    return Response(status_code=204)


@router.get("/me", response_class=HTMLResponse)
def my_work(
    request: Request,
    user: CurrentUser,
    session: DbSession,
    page: Annotated[PageNumber, Query()] = 1,
) -> HTMLResponse:
    """The labeler's own work: totals, quality-control answers and their labels, newest
    first (the history table alone for htmx)."""
    labels = history.my_history(session, user.id, page)
    if wants_fragment(request):
        return render(request, "me.html", {"history": labels}, block="history")
    answers = history.gold_answers(session, user.id)
    settings = runtime_settings(session.connection(), get_settings())
    context = {
        "work": history.my_work(session, user.id, utc_now()),
        "history": labels,
        "answers": answers,
        "quality_control": history.pooled(answers),
        "threshold": settings["screening_threshold"],
    }
    return render(request, "me.html", context)


def my_answer(label_id: DbId, user: CurrentUser, session: DbSession) -> history.AnswerReview:
    """Dependency: the user's own answer to a gold question (beside the gold label where it
    may be shown to them), or 404."""
    review = history.answer_review(session, user.id, label_id)
    if review is None:
        # 404 for a label of someone else's, or not an answer: ids reveal nothing.
        raise HTTPException(404, "There is no such answer of yours.")
    return review


@router.get("/me/answers/{label_id}", response_class=HTMLResponse)
def my_answer_page(
    request: Request, review: Annotated[history.AnswerReview, Depends(my_answer)]
) -> HTMLResponse:
    return render(request, "me_answer.html", {"review": review})


@router.get("/guidelines", response_class=HTMLResponse)
def guidelines(request: Request, user: CurrentUser, session: DbSession) -> HTMLResponse:
    return render(request, "guidelines.html", {"guidelines": service.guidelines(session)})
