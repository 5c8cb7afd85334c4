"""The admin dashboard's pages and its JSON API. Every route here is for admins only.

Pages answer htmx requests with their live block (figures refresh every 30 seconds, and at
once after an admin's change: successful POSTs send the ``dashboard-refresh`` event).
Forms post with htmx and get back a fragment, a result or the form with its errors (422);
without JavaScript they get the whole page with the same result.
"""

import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Depends, Form, HTTPException, Query, Request, UploadFile
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from sqlalchemy.orm import Session
from starlette.background import BackgroundTask

from app import audit, training
from app.admin import (
    charts,
    disagreements,
    import_jobs,
    imports,
    notes,
    people,
    prm,
    progress,
    throughput,
)
from app.admin.agreement.queries import label_generations
from app.admin.agreement.views import (
    KAPPA_BANDS,
    AgreementReport,
    agreement_report,
    kappa_band,
    kappa_matrix,
)
from app.admin.overview import Overview, overview
from app.auth import tokens as api_tokens
from app.auth import users
from app.auth.sessions import CurrentAdmin, current_admin
from app.consensus import service as consensus_service
from app.core.config import get_settings
from app.core.csrf import check_csrf
from app.core.db import DbSession
from app.datasets.examples import EXAMPLE_LINES
from app.datasets.export import ExportFilter
from app.datasets.reading import describe
from app.inputs import INTEGER_MAX, DbId, PageNumber, Text
from app.models import (
    SCREENING_GENERATION,
    UNNUMBERED_GENERATION,
    TokenScope,
    TrainingRun,
    User,
    utc_now,
)
from app.project_settings import (
    RUNTIME_KEYS,
    forget_cached,
    parse_runtime_value,
    runtime_settings,
    set_value,
)
from app.quality import questions, review, scoring
from app.templating import render, wants_fragment

# current_admin runs first, so a labeler's POST is refused as a labeler (403), not as CSRF.
pages = APIRouter(prefix="/admin", dependencies=[Depends(current_admin), Depends(check_csrf)])
api = APIRouter(prefix="/api/admin", dependencies=[Depends(current_admin), Depends(check_csrf)])

REFRESH = {"HX-Trigger": "dashboard-refresh"}
"""Sent with a successful change: the page's live blocks reload at once."""
NO_STORE = {"Cache-Control": "no-store"}
"""Sent with a new password: no cache keeps it."""

Context = Callable[[], dict[str, Any]]
Row = TypeVar("Row")


def _settings(session: Session) -> dict[str, Any]:
    return runtime_settings(session.connection(), get_settings())


def _threshold(session: Session) -> float:
    """The share of gold step ratings a labeler must match to pass screening and QC."""
    return float(_settings(session)["screening_threshold"])


def _min_answers(session: Session) -> int:
    """The QC answers a labeler needs before QC gives a verdict."""
    return int(_settings(session)["qc_min_answers"])


def _default_overlap(session: Session) -> int:
    """Labelers per solution, where a solution does not set its own."""
    return int(_settings(session)["overlap"])


def live_page(
    request: Request, template: str, context: dict[str, Any], live_block: str
) -> HTMLResponse:
    """The whole page, or its ``live_block`` for htmx's refresh."""
    block = live_block if wants_fragment(request) else None
    return render(request, template, {"charts": charts, **context}, block=block)


def _answer(
    request: Request,
    template: str,
    page: Context,
    outcome: dict[str, Any],
    *,
    failed: bool = False,
    block: str = "result",
    headers: dict[str, str] | None = None,
) -> HTMLResponse:
    """A form's outcome: its ``block`` for htmx, else the whole ``page`` showing it."""
    status_code = 422 if failed else 200
    if wants_fragment(request):
        context = {"charts": charts, **outcome}
        response = render(request, template, context, block=block, status_code=status_code)
    else:
        context = {"charts": charts, **page(), **outcome}
        response = render(request, template, context, status_code=status_code)
    response.headers.update({**(headers or {}), **({} if failed else REFRESH)})
    return response


# Overview


@pages.get("", response_class=HTMLResponse)
def overview_page(request: Request, session: DbSession) -> HTMLResponse:
    context = {"section": "overview", "overview": _overview(session)}
    return live_page(request, "admin/overview.html", context, "figures")


@api.get("/overview")
def overview_api(session: DbSession) -> Overview:
    return _overview(session)


def _overview(session: Session) -> Overview:
    return overview(
        session,
        get_settings(),
        _default_overlap(session),
        _threshold(session),
        min_answers=_min_answers(session),
    )


# Agreement


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
Page = Annotated[PageNumber, Query()]


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
    return live_page(request, "admin/agreement.html", context, "figures")


@api.get("/agreement")
def agreement_api(session: DbSession, generation: Generation) -> AgreementReport:
    return _agreement(session, generation)


def _agreement(session: Session, generation: int | None) -> AgreementReport:
    return agreement_report(
        session, _threshold(session), generation, min_answers=_min_answers(session)
    )


@pages.get("/agreement/items", response_class=HTMLResponse)
def disagreed_items_page(
    request: Request, session: DbSession, generation: Generation, page: Page = 1
) -> HTMLResponse:
    context = {
        "section": "agreement",
        "items": disagreements.most_disagreed(session, generation, page),
        "generations": label_generations(session),
    }
    return live_page(request, "admin/disagreements.html", context, "item_table")


@api.get("/agreement/items")
def disagreed_items_api(
    session: DbSession, generation: Generation, page: Page = 1
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


# Progress and throughput


@pages.get("/progress", response_class=HTMLResponse)
def progress_page(request: Request, session: DbSession) -> HTMLResponse:
    context = {"section": "progress", "progress": _progress(session)}
    return live_page(request, "admin/progress.html", context, "figures")


@api.get("/progress")
def progress_api(session: DbSession) -> progress.Progress:
    return _progress(session)


def _progress(session: Session) -> progress.Progress:
    return progress.progress(session, _default_overlap(session))


def existing_window(window: str = throughput.DEFAULT_WINDOW) -> throughput.Window:
    """Dependency: the ``window`` query parameter, or 404 for one the page does not offer."""
    if window not in throughput.WINDOWS:
        choices = ", ".join(throughput.WINDOWS)
        raise HTTPException(404, f"There is no window {window!r}: choose one of {choices}.")
    return throughput.WINDOWS[window]


Window = Annotated[throughput.Window, Depends(existing_window)]


@pages.get("/throughput", response_class=HTMLResponse)
def throughput_page(request: Request, session: DbSession, window: Window) -> HTMLResponse:
    context = {
        "section": "throughput",
        "windows": throughput.WINDOWS.values(),
        "throughput": throughput.throughput(session, window),
    }
    return live_page(request, "admin/throughput.html", context, "figures")


@api.get("/throughput")
def throughput_api(session: DbSession, window: Window) -> throughput.Throughput:
    return throughput.throughput(session, window)


# Quality control


@pages.get("/qc", response_class=HTMLResponse)
def qc_page(request: Request, session: DbSession, admin: CurrentAdmin) -> HTMLResponse:
    return live_page(request, "admin/qc.html", _qc_context(session, admin), "quality")


@api.get("/quality")
def quality_api(session: DbSession) -> list[scoring.LabelerQuality]:
    return scoring.labeler_quality(session, _threshold(session), min_answers=_min_answers(session))


def _qc_context(session: Session, admin: User) -> dict[str, Any]:
    values, threshold = _settings(session), _threshold(session)
    return {
        "section": "qc",
        "threshold": threshold,
        "values": {key: str(values[key]) for key in RUNTIME_KEYS},
        "errors": {},
        "min_answers": _min_answers(session),
        "labelers": scoring.labeler_quality(session, threshold, min_answers=_min_answers(session)),
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
        before = _settings(session)
        for key, value in parsed.items():
            set_value(session, key, value)
        changed = [key for key, value in parsed.items() if before.get(key) != value]
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
        "values": {key: str(value) for key, value in _settings(session).items()} | entered,
        "errors": errors,
        "saved": not errors,
    }
    return _answer(
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
        solution, label = _whole_number(solution_id, "solution"), _whole_number(label_id, "label")
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
        number = _whole_number(generation, "generation", minimum=SCREENING_GENERATION)
        wanted = _whole_number(count, "number of solutions")
        labelers = parse_runtime_value("overlap", overlap)
        sampled = review.sample_for_agreement(
            session,
            number,
            wanted,
            labelers,
            default_overlap=_default_overlap(session),
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
    return _answer(
        request,
        "admin/qc.html",
        lambda: _qc_context(session, admin),
        {"message": message, "error": error},
        failed=error is not None,
    )


def _whole_number(text: str, name: str, minimum: int = 1) -> int:
    """A form field as an integer from ``minimum`` to what an INTEGER column holds;
    ValueError naming the field otherwise."""
    try:
        number = int(text.strip())
    except ValueError:
        raise ValueError(f"{name}: give a whole number, not {text.strip()!r}") from None
    if number < minimum:
        raise ValueError(f"{name}: give a number of at least {minimum}")
    if number > INTEGER_MAX:
        raise ValueError(f"{name}: give a number of at most {INTEGER_MAX:,}")
    return number


# Notes

NoteReason = Annotated[
    Literal["give_up", "bad_problem"] | None,
    Query(description="Only notes of this finish reason."),
]


@pages.get("/notes", response_class=HTMLResponse)
def notes_page(
    request: Request, session: DbSession, reason: NoteReason = None, page: Page = 1
) -> HTMLResponse:
    context = {"section": "notes", "notes": notes.notes_page(session, reason, page)}
    return live_page(request, "admin/notes.html", context, "note_table")


@pages.get("/notes.jsonl")
def notes_download(session: DbSession) -> Response:
    """Every give-up and bad-problem note as JSONL, a file beside the PRM800K export."""
    out = io.StringIO()
    notes.write_notes(session, out, ExportFilter())
    name = f"notes-{utc_now():%Y%m%dT%H%M%SZ}.jsonl"
    return Response(
        out.getvalue(),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


# Users


@pages.get("/users", response_class=HTMLResponse)
def users_page(request: Request, session: DbSession) -> HTMLResponse:
    return live_page(request, "admin/users.html", _users_context(session), "user_table")


def _users_context(session: Session) -> dict[str, Any]:
    threshold = _threshold(session)
    return {
        "section": "users",
        "threshold": threshold,
        "people": people.people(session, threshold),
        "api_tokens": api_tokens.list_tokens(session),
        "token_scopes": [scope.value for scope in TokenScope],
    }


def _row_or_404(session: Session, table: type[Row], key: int, noun: str) -> Row:
    row = session.get(table, key)
    if row is None:
        raise HTTPException(404, f"There is no {noun} {key}.")
    return row


def existing_user(user_id: DbId, session: DbSession) -> User:
    """Dependency: the user named in the path, or 404."""
    return _row_or_404(session, User, user_id, "user")


ExistingUser = Annotated[User, Depends(existing_user)]


@pages.post("/users", response_class=HTMLResponse)
def create_user(
    request: Request,
    session: DbSession,
    admin: CurrentAdmin,
    name: Annotated[Text, Form()] = "",
    role: Annotated[str, Form()] = "labeler",
    approved: Annotated[bool, Form()] = False,
) -> HTMLResponse:
    try:
        user, password = people.create_account(session, name, role, approved=approved)
    except ValueError as error:
        return _users_answer(
            request, session, {"error": str(error), "entered": {"name": name, "role": role}}
        )
    after = {"role": user.role, "is_approved": user.is_approved, "password": "set"}
    audit.record(session, admin, "user.create", f"user {user.name}", None, after)
    outcome = {"message": f"Created {user.role} {user.name}.", "password_for": user.name}
    return _users_answer(request, session, {**outcome, "password": password}, NO_STORE)


@dataclass(frozen=True)
class UserChange:
    """A button on the users page that changes one user: its path, audit action and answer."""

    path: str
    action: str
    said: str
    """What the answer says, with ``{name}`` for the user's name."""
    not_on_yourself: str | None = None
    """The error an admin gets who tries it on themselves; None: allowed."""


USER_CHANGES = (
    UserChange("approve", "user.approve", "{name} is approved: regular tasks are open to them."),
    UserChange(
        "deactivate",
        "user.deactivate",
        "{name} is deactivated and logged out at their next request.",
        not_on_yourself="You cannot deactivate yourself.",
    ),
    UserChange(
        "reactivate",
        "user.reactivate",
        "{name} is active again and can log in with their password.",
    ),
    UserChange(
        "end-sessions",
        "user.end_sessions",
        "{name} is logged out everywhere, at their next request.",
    ),
)


def _user_change_route(change: UserChange) -> Callable[..., HTMLResponse]:
    def changed(
        request: Request, session: DbSession, admin: CurrentAdmin, user: ExistingUser
    ) -> HTMLResponse:
        if change.not_on_yourself and user.id == admin.id:
            return _users_answer(request, session, {"error": change.not_on_yourself})
        users.change_user(session, admin, change.action, user.name)
        return _users_answer(request, session, {"message": change.said.format(name=user.name)})

    return changed


# One route per change, alike but for what USER_CHANGES says of it.
for _change in USER_CHANGES:
    pages.add_api_route(
        f"/users/{{user_id}}/{_change.path}",
        _user_change_route(_change),
        methods=["POST"],
        response_class=HTMLResponse,
        name=_change.action.replace(".", "_"),
    )


@pages.post("/users/{user_id}/reset-password", response_class=HTMLResponse)
def reset_password(
    request: Request, session: DbSession, admin: CurrentAdmin, user: ExistingUser
) -> HTMLResponse:
    password = users.new_password()
    users.change_user(session, admin, "user.reset_password", user.name, password)
    outcome = {
        "message": f"New password for {user.name}; their open sessions have ended.",
        "password_for": user.name,
        "password": password,
    }
    return _users_answer(request, session, outcome, NO_STORE)


@pages.post("/tokens", response_class=HTMLResponse)
def create_token(
    request: Request,
    session: DbSession,
    admin: CurrentAdmin,
    user_id: Annotated[str, Form()] = "",
    name: Annotated[Text, Form()] = "",
    scopes: Annotated[list[str] | None, Form()] = None,
    expires_days: Annotated[str, Form()] = "",
) -> HTMLResponse:
    """An API token for a user, shown once in the answer (never stored but hashed)."""
    try:
        owner = session.get(User, _whole_number(user_id, "user"))
        if owner is None:
            raise ValueError("choose the token's user")
        days = _whole_number(expires_days, "expires in days") if expires_days.strip() else None
        token, secret = api_tokens.create_token(
            session,
            owner,
            name,
            api_tokens.parse_scopes(",".join(scopes or [])),
            created_by=admin,
            expires_at=api_tokens.expiry_in(days),
        )
    except ValueError as error:
        return _users_answer(request, session, {"error": str(error)})
    outcome = {
        "message": f"Created API token {token.name!r} for {owner.name} ({token.scopes}).",
        "api_token": secret,
        "api_token_for": owner.name,
    }
    return _users_answer(request, session, outcome, NO_STORE)


@pages.post("/tokens/{token_id}/revoke", response_class=HTMLResponse)
def revoke_token(
    request: Request, session: DbSession, admin: CurrentAdmin, token_id: DbId
) -> HTMLResponse:
    try:
        token = api_tokens.revoke_token(session, token_id, admin)
    except LookupError:
        raise HTTPException(404, f"There is no API token {token_id}.") from None
    message = f"API token {token.name!r} revoked: refused from its next request on."
    return _users_answer(request, session, {"message": message})


def _users_answer(
    request: Request,
    session: Session,
    outcome: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> HTMLResponse:
    return _answer(
        request,
        "admin/users.html",
        lambda: _users_context(session),
        outcome,
        failed="error" in outcome,
        headers=headers,
    )


# Imports


@pages.get("/imports", response_class=HTMLResponse)
def imports_page(request: Request, session: DbSession) -> HTMLResponse:
    return live_page(request, "admin/imports.html", _imports_context(session), "jobs")


def _imports_context(session: Session) -> dict[str, Any]:
    return {
        "section": "imports",
        "kinds": imports.IMPORT_KINDS,
        "examples": EXAMPLE_LINES,
        "jobs": import_jobs.recent_jobs(session),
    }


@pages.post("/imports", response_class=HTMLResponse)
def upload(
    request: Request,
    session: DbSession,
    admin: CurrentAdmin,
    file: UploadFile | None = None,
    kind: Annotated[str, Form()] = "",
    skip_invalid: Annotated[bool, Form()] = False,
    generation: Annotated[str, Form()] = "0",
    no_queue: Annotated[bool, Form()] = False,
) -> HTMLResponse:
    """Spool the file and queue a job for it; the import runs after the response."""
    try:
        if file is None or not file.filename:
            raise ValueError("choose a JSONL file to upload")
        name = import_jobs.job_file_name(file.filename)
        options = imports.UploadOptions(
            kind=kind,
            skip_invalid=skip_invalid,
            generation=_whole_number(generation, "generation", minimum=SCREENING_GENERATION),
            queue=not no_queue,
        )
    except ValueError as error:
        return _imports_answer(request, session, {"error": str(error)})
    job, upload = import_jobs.queue_upload(session, file.file, name, options, admin.id)
    after = {
        "job": job.id,
        "kind": options.kind,
        "generation": options.generation,
        "queue": options.queue,
        "skip_invalid": options.skip_invalid,
    }
    audit.record(session, admin, "import.queue", f"file {name}", None, after)
    response = _imports_answer(request, session, {"submitted": job})
    # A background task runs once the response is out, after the request's transaction
    # committed the job's row; the job runs in the import thread, not in this request.
    # Should the response fail, the spooled file is closed with it (import_jobs.spool).
    response.background = BackgroundTask(
        import_jobs.RUNNER.start, get_settings().database_url, job.id, upload
    )
    return response


def _imports_answer(request: Request, session: Session, outcome: dict[str, Any]) -> HTMLResponse:
    return _answer(
        request,
        "admin/imports.html",
        lambda: _imports_context(session),
        {"jobs": import_jobs.recent_jobs(session), **outcome},
        failed="error" in outcome,
        block="uploads",
    )


# The PRM


@pages.get("/prm", response_class=HTMLResponse)
def prm_page(request: Request, session: DbSession) -> HTMLResponse:
    return live_page(request, "admin/prm.html", _prm_context(session), "figures")


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
    return _row_or_404(session, TrainingRun, run_id, "training run")


ExistingRun = Annotated[TrainingRun, Depends(existing_run)]


@pages.get("/prm/runs/{run_id}", response_class=HTMLResponse)
def run_page(request: Request, run: ExistingRun) -> HTMLResponse:
    context = {"section": "prm", "detail": prm.run_detail(run)}
    return live_page(request, "admin/prm_run.html", context, "figures")


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
    action = "prm.pin" if pinned else "prm.unpin"
    audit.record(
        session, admin, action, f"training run {run.id}", {"pinned": before}, {"pinned": pinned}
    )


def _prm_answer(
    request: Request, session: Session, *, message: str | None = None, error: str | None = None
) -> HTMLResponse:
    return _answer(
        request,
        "admin/prm.html",
        lambda: _prm_context(session),
        {"message": message, "error": error},
        failed=error is not None,
    )
