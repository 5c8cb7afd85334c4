"""The agreement pages and their JSON, included in app/admin/router.py's admin-only routers."""

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse

from app.admin.agreement import (
    KAPPA_BANDS,
    AgreementReport,
    agreement_report,
    kappa_band,
    kappa_matrix,
    label_generations,
)
from app.admin.disagreements import DisagreementPage, ItemRatings, item_ratings, most_disagreed
from app.db import DbSession
from app.templating import render, wants_fragment

pages = APIRouter(prefix="/agreement")
api = APIRouter(prefix="/agreement")

Generation = Annotated[int | None, Query(description="Only labels of this generation.")]
Page = Annotated[int, Query(ge=1)]


def existing_item(solution_id: int, session: DbSession) -> ItemRatings:
    """Dependency: the solution named in the path with its counted labels, or 404."""
    item = item_ratings(session, solution_id)
    if item is None:
        raise HTTPException(status_code=404, detail=f"There is no solution {solution_id}.")
    return item


Item = Annotated[ItemRatings, Depends(existing_item)]


@pages.get("", response_class=HTMLResponse)
def agreement_page(
    request: Request, session: DbSession, generation: Generation = None
) -> HTMLResponse:
    report = agreement_report(session, generation)
    context: dict[str, object] = {
        "report": report,
        "matrix": kappa_matrix(report.pairs),
        "kappa_band": kappa_band,
        "kappa_bands": KAPPA_BANDS,
    }
    if wants_fragment(request):
        return render(request, "admin/agreement.html", context, block="figures")
    context |= {"section": "agreement", "generations": label_generations(session)}
    return render(request, "admin/agreement.html", context)


@pages.get("/items", response_class=HTMLResponse)
def disagreed_items_page(
    request: Request, session: DbSession, generation: Generation = None, page: Page = 1
) -> HTMLResponse:
    context: dict[str, object] = {"items": most_disagreed(session, generation, page)}
    if wants_fragment(request):
        return render(request, "admin/disagreements.html", context, block="item_table")
    context |= {"section": "agreement", "generations": label_generations(session)}
    return render(request, "admin/disagreements.html", context)


@pages.get("/items/{solution_id}", response_class=HTMLResponse)
def item_page(request: Request, item: Item) -> HTMLResponse:
    return render(request, "admin/disagreement.html", {"section": "agreement", "item": item})


@api.get("")
def agreement_json(session: DbSession, generation: Generation = None) -> AgreementReport:
    return agreement_report(session, generation)


@api.get("/items")
def disagreed_items_json(
    session: DbSession, generation: Generation = None, page: Page = 1
) -> DisagreementPage:
    return most_disagreed(session, generation, page)


@api.get("/items/{solution_id}")
def item_json(item: Item) -> ItemRatings:
    return item
