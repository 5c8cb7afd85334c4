"""The Quality control screen: labelers' scores, the gold questions, the screening and
QC settings, and sampling solutions for agreement."""

from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError
from sqlalchemy.orm import Session

from app import audit
from app.admin import dashboard, progress
from app.auth.sessions import CurrentAdmin
from app.core.db import DbSession
from app.datasets.reading import describe
from app.inputs import DbId
from app.labeling import service
from app.models import SCREENING_GENERATION, User
from app.project_settings import RUNTIME_KEYS, forget_cached, parse_runtime_value, set_value
from app.quality import questions, review, scoring

pages = APIRouter()
api = APIRouter()


@pages.get("/qc", response_class=HTMLResponse)
def qc_page(request: Request, session: DbSession, admin: CurrentAdmin) -> HTMLResponse:
    return dashboard.live_page(request, "admin/qc.html", _qc_context(session, admin), "quality")


@api.get("/quality")
def quality_api(session: DbSession) -> list[scoring.LabelerQuality]:
    return scoring.labeler_quality(
        session, dashboard.threshold(session), min_answers=dashboard.min_answers(session)
    )


def _qc_context(session: Session, admin: User) -> dict[str, Any]:
    values, threshold = dashboard.runtime_values(session), dashboard.threshold(session)
    return {
        "section": "qc",
        "threshold": threshold,
        "values": {key: str(values[key]) for key in RUNTIME_KEYS},
        "errors": {},
        "min_answers": dashboard.min_answers(session),
        "labelers": scoring.labeler_quality(
            session, threshold, min_answers=dashboard.min_answers(session)
        ),
        "questions": review.qc_questions(session),
        "candidates": review.gold_candidates(session, admin.id),
        "open_generations": progress.open_by_generation(session),
    }


@pages.post("/qc/settings", response_class=HTMLResponse)
def save_qc_settings(
    request: Request,
    session: DbSession,
    admin: CurrentAdmin,
    overlap: Annotated[str, Form()] = "",
    qc_rate: Annotated[str, Form()] = "",
    screening_threshold: Annotated[str, Form()] = "",
    qc_min_answers: Annotated[str | None, Form()] = None,
) -> HTMLResponse:
    sent = {
        "overlap": overlap,
        "qc_rate": qc_rate,
        "screening_threshold": screening_threshold,
        "qc_min_answers": qc_min_answers,
    }
    # A form on a page opened before a setting existed does not send it: it stays as it is.
    entered = {key: text for key, text in sent.items() if text is not None}
    parsed, errors = {}, {}
    for key, text in entered.items():
        try:
            parsed[key] = parse_runtime_value(key, text)
        except ValidationError as error:
            errors[key] = describe(error)
    if not errors:
        forget_cached()  # the values as they stand, for the audit log, not a cached copy
        before = dashboard.runtime_values(session)
        changed = [key for key, value in parsed.items() if before.get(key) != value]
        # Only what the admin changed is stored over the environment's value: the form
        # sends every field, and storing them all would freeze the others, so that an
        # operator's later STEPLABEL_OVERLAP (say) would never take effect.
        for key in changed:
            set_value(session, key, parsed[key])
        if "overlap" in changed:
            service.set_default_overlap(session, parsed["overlap"])
        if changed:
            audit.record(
                session,
                admin,
                "qc.settings",
                "project settings",
                {key: before.get(key) for key in changed},
                {key: parsed[key] for key in changed},
            )
    outcome = {
        "values": {key: str(value) for key, value in dashboard.runtime_values(session).items()}
        | entered,
        "errors": errors,
        "saved": not errors,
    }
    return dashboard.form_answer(
        request,
        "admin/qc.html",
        lambda: _qc_context(session, admin),
        outcome,
        failed=bool(errors),
        block="settings_form",
    )


@pages.post("/qc/gold", response_class=HTMLResponse)
def make_gold(
    request: Request,
    session: DbSession,
    admin: CurrentAdmin,
    solution_id: Annotated[str, Form()] = "",
    label_id: Annotated[str, Form()] = "",
) -> HTMLResponse:
    try:
        solution, label = (
            dashboard.whole_number(solution_id, "solution"),
            dashboard.whole_number(label_id, "label"),
        )
        questions.set_gold(session, admin, solution, label)
    except (LookupError, ValueError) as error:
        return _qc_answer(request, session, admin, error=str(error.args[0]))
    message = f"Solution {solution} is a quality-control question with gold label {label}."
    return _qc_answer(request, session, admin, message=message)


@pages.post("/qc/{solution_id}/remove", response_class=HTMLResponse)
def remove_gold(
    request: Request, session: DbSession, admin: CurrentAdmin, solution_id: DbId
) -> HTMLResponse:
    try:
        questions.remove_gold(session, admin, solution_id)
    except LookupError as error:
        return _qc_answer(request, session, admin, error=str(error.args[0]))
    message = f"Solution {solution_id} is no longer a quality-control question."
    return _qc_answer(request, session, admin, message=message)


@pages.post("/qc/sample", response_class=HTMLResponse)
def sample_for_agreement(
    request: Request,
    session: DbSession,
    admin: CurrentAdmin,
    generation: Annotated[str, Form()] = "",
    count: Annotated[str, Form()] = "",
    overlap: Annotated[str, Form()] = "",
) -> HTMLResponse:
    try:
        number = dashboard.whole_number(generation, "generation", minimum=SCREENING_GENERATION)
        wanted = dashboard.whole_number(count, "number of solutions")
        labelers = parse_runtime_value("overlap", overlap)
        sampled = review.sample_for_agreement(
            session,
            number,
            wanted,
            labelers,
            default_overlap=dashboard.default_overlap(session),
        )
    except ValidationError as error:
        return _qc_answer(request, session, admin, error=f"overlap: {describe(error)}")
    except ValueError as error:
        return _qc_answer(request, session, admin, error=str(error))
    audit.record(
        session,
        admin,
        "qc.sample",
        f"generation {number}",
        {"overlap": f"below {labelers}"},
        {"overlap": labelers, "solutions": sampled},
    )
    message = f"{sampled} open solutions of generation {number} now go to {labelers} labelers each."
    return _qc_answer(request, session, admin, message=message)


def _qc_answer(
    request: Request,
    session: Session,
    admin: User,
    *,
    message: str | None = None,
    error: str | None = None,
) -> HTMLResponse:
    return dashboard.form_answer(
        request,
        "admin/qc.html",
        lambda: _qc_context(session, admin),
        {"message": message, "error": error},
        failed=error is not None,
    )
