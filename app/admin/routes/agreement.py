"""The Agreement screen: agreement between labelers, the most disagreed solutions and
an admin's adjudication of one."""

import re
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.orm import Session

from app.admin import dashboard, disagreements
from app.admin.agreement.queries import label_generations
from app.admin.agreement.views import (
    KAPPA_BANDS,
    AgreementReport,
    agreement_report,
    kappa_band,
    kappa_matrix,
)
from app.auth.sessions import CurrentAdmin
from app.consensus import service as consensus_service
from app.core.db import DbSession
from app.inputs import INTEGER_MAX, DbId
from app.models import SCREENING_GENERATION, UNNUMBERED_GENERATION
from app.templating import render

pages = APIRouter()
api = APIRouter()


def generation_filter(
    generation: Annotated[
        str | None,
        Query(
            max_length=12,
            description="Only labels of this generation; `none`: labels without one (phase 1).",
        ),
    ] = None,
) -> int | None:
    """Dependency: the generation filter, UNNUMBERED_GENERATION for ``none``; 422 for
    anything else that is not a generation."""
    if generation is None or generation == "":
        return None
    if generation == "none":
        return UNNUMBERED_GENERATION
    try:
        number = int(generation)
    except ValueError:
        number = None
    if number is None or not SCREENING_GENERATION <= number <= INTEGER_MAX:
        raise HTTPException(422, f"generation must be a number from -1 to {INTEGER_MAX}, or none")
    return number


Generation = Annotated[int | None, Depends(generation_filter)]


@pages.get("/agreement", response_class=HTMLResponse)
def agreement_page(request: Request, session: DbSession, generation: Generation) -> HTMLResponse:
    report = _agreement(session, generation)
    context = {
        "section": "agreement",
        "report": report,
        "matrix": kappa_matrix(report.pairs),
        "kappa_band": kappa_band,
        "kappa_bands": KAPPA_BANDS,
        "generations": label_generations(session),
    }
    return dashboard.live_page(request, "admin/agreement.html", context, "figures")


@api.get("/agreement")
def agreement_api(session: DbSession, generation: Generation) -> AgreementReport:
    return _agreement(session, generation)


def _agreement(session: Session, generation: int | None) -> AgreementReport:
    return agreement_report(
        session,
        dashboard.threshold(session),
        generation,
        min_answers=dashboard.min_answers(session),
    )


@pages.get("/agreement/items", response_class=HTMLResponse)
def disagreed_items_page(
    request: Request, session: DbSession, generation: Generation, page: dashboard.Page = 1
) -> HTMLResponse:
    context = {
        "section": "agreement",
        "items": disagreements.most_disagreed(session, generation, page),
        "generations": label_generations(session),
    }
    return dashboard.live_page(request, "admin/disagreements.html", context, "item_table")


@api.get("/agreement/items")
def disagreed_items_api(
    session: DbSession, generation: Generation, page: dashboard.Page = 1
) -> disagreements.DisagreementPage:
    return disagreements.most_disagreed(session, generation, page)


def existing_item(solution_id: DbId, session: DbSession) -> disagreements.ItemRatings:
    """Dependency: the solution named in the path with its counted labels, or 404."""
    item = disagreements.item_ratings(session, solution_id)
    if item is None:
        raise HTTPException(404, f"There is no solution {solution_id}.")
    return item


Item = Annotated[disagreements.ItemRatings, Depends(existing_item)]


@pages.get("/agreement/items/{solution_id}", response_class=HTMLResponse)
def item_page(request: Request, session: DbSession, item: Item) -> HTMLResponse:
    return _item_page(request, session, item)


def _item_page(
    request: Request, session: Session, item: disagreements.ItemRatings, error: str | None = None
) -> HTMLResponse:
    context = {
        "section": "agreement",
        "item": item,
        "consensus": consensus_service.solution_consensus(session, item.solution_id),
        "adjudication_error": error,
    }
    return render(request, "admin/disagreement.html", context, status_code=422 if error else 200)


@pages.post("/agreement/items/{solution_id}/adjudication", response_class=HTMLResponse)
async def adjudicate_item(
    request: Request, session: DbSession, admin: CurrentAdmin, item: Item
) -> Response:
    """Store the solution's final ratings: one label's (``source_label_id``), or the
    ``rating`` fields in step order (blank: not rated)."""
    form = await request.form()
    source = form.get("source_label_id")
    try:
        if isinstance(source, str) and source:
            consensus_service.adjudicate(
                session, item.solution_id, admin.id, source_label_id=_form_int(source)
            )
        else:
            ratings = [value for value in form.getlist("rating") if isinstance(value, str)]
            consensus_service.adjudicate(
                session, item.solution_id, admin.id, ratings=_ratings(ratings)
            )
    except consensus_service.AdjudicationError as error:
        return _item_page(request, session, item, str(error))
    href = f"/admin/agreement/items/{item.solution_id}#consensus"
    return RedirectResponse(href, status_code=303)


@pages.post("/agreement/items/{solution_id}/adjudication/clear", response_class=HTMLResponse)
def clear_adjudication(
    request: Request, session: DbSession, admin: CurrentAdmin, item: Item
) -> Response:
    """Undo the solution's adjudication: its labels' vote decides again."""
    try:
        consensus_service.clear_adjudication(session, item.solution_id, admin)
    except consensus_service.AdjudicationError as error:
        return _item_page(request, session, item, str(error))
    href = f"/admin/agreement/items/{item.solution_id}#consensus"
    return RedirectResponse(href, status_code=303)


def _form_int(value: str) -> int:
    """A form's whole number, -1 up to a row id; AdjudicationError (422) for anything else."""
    if re.fullmatch(r"-?[0-9]{1,10}", value) is None or not -1 <= int(value) <= INTEGER_MAX:
        raise consensus_service.AdjudicationError(f"{value[:20]!r} is not a rating or label id")
    return int(value)


def _ratings(values: list[str]) -> list[int]:
    """The ratings as sent, blanks at the end dropped (steps left unrated)."""
    while values and not values[-1]:
        values.pop()
    if "" in values:
        step = values.index("") + 1
        raise consensus_service.AdjudicationError(f"step {step} has no rating")
    return [_form_int(value) for value in values]


@api.get("/agreement/items/{solution_id}/consensus")
def item_consensus_api(session: DbSession, item: Item) -> consensus_service.AdjudicationView:
    return consensus_service.solution_consensus(session, item.solution_id)


@api.get("/agreement/items/{solution_id}")
def item_api(item: Item) -> disagreements.ItemRatings:
    return item
