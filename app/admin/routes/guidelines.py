"""The Guidelines editor: the admin writes the labelers' guidelines (markdown), which
/guidelines shows them."""

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from app import audit
from app.auth.sessions import CurrentAdmin
from app.core.db import DbSession
from app.inputs import Text
from app.labeling import service
from app.templating import render

pages = APIRouter()


@pages.get("/guidelines", response_class=HTMLResponse)
def edit_guidelines(request: Request, admin: CurrentAdmin, session: DbSession) -> HTMLResponse:
    context = {"guidelines": service.guidelines(session), "max_chars": GUIDELINES_MAX_CHARS}
    return render(request, "guidelines_edit.html", context)


GUIDELINES_MAX_CHARS = 100_000
"""At most 400 kB in UTF-8: the form can never reach the 1 MiB body limit, whose refusal
would lose what the admin typed."""


@pages.post("/guidelines", response_model=None)
def save_guidelines(
    admin: CurrentAdmin,
    session: DbSession,
    text: Annotated[Text, Form(max_length=GUIDELINES_MAX_CHARS)],
) -> RedirectResponse:
    before = service.guidelines(session)
    service.save_guidelines(session, text)
    if text != before:
        audit.record(
            session, admin, "guidelines.edit", "guidelines", {"text": before}, {"text": text}
        )
    return RedirectResponse("/guidelines", status_code=303)
