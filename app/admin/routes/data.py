"""The Data screen: the totals and a paged table of problems, and one problem's solutions."""

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse

from app.admin.data import ProblemDetail, problem_detail, problem_page, totals
from app.core.db import DbSession
from app.inputs import DbId, PageNumber
from app.templating import render, wants_fragment

pages = APIRouter()


def existing_problem(problem_id: DbId, session: DbSession) -> ProblemDetail:
    """Dependency: the problem named in the path, or 404."""
    detail = problem_detail(session, problem_id)
    if detail is None:
        raise HTTPException(status_code=404, detail=f"There is no problem {problem_id}.")
    return detail


@pages.get("/data", response_class=HTMLResponse)
def index(
    request: Request, session: DbSession, page: Annotated[PageNumber, Query()] = 1
) -> HTMLResponse:
    problems = problem_page(session, page)
    if wants_fragment(request):
        return render(request, "index.html", {"problems": problems}, block="problem_table")
    context = {"section": "data", "totals": totals(session), "problems": problems}
    return render(request, "index.html", context)


@pages.get("/problems/{problem_id}", response_class=HTMLResponse)
def problem(
    request: Request, detail: Annotated[ProblemDetail, Depends(existing_problem)]
) -> HTMLResponse:
    return render(request, "problem.html", {"section": "data", "detail": detail})
