"""The Guidelines editor: the admin writes the labelers' guidelines (markdown), which
/guidelines shows them."""

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from app import audit
from app.auth.sessions import CurrentAdmin
from app.core.db import DbSession
from app.labeling import service
from app.storable import storable
from app.templating import render

pages = APIRouter()


@pages.get("/guidelines", response_class=HTMLResponse)
def edit_guidelines(request: Request, admin: CurrentAdmin, session: DbSession) -> HTMLResponse:
    return _editor(request, service.guidelines(session))


GUIDELINES_MAX_CHARS = 100_000
"""At most 400 kB in UTF-8: the form can never reach the 1 MiB body limit, whose refusal
would lose what the admin typed."""


@pages.post("/guidelines", response_model=None)
def save_guidelines(
    request: Request,
    admin: CurrentAdmin,
    session: DbSession,
    text: Annotated[str, Form()] = "",
) -> RedirectResponse | HTMLResponse:
    """Save the guidelines; a text that cannot be saved comes back in the editor, with why
    (a browser counts a line break as one character, the form sends two)."""
    try:
        checked = guidelines_text(text)
    except ValueError as error:
        return _editor(request, text, str(error), status_code=422)
    before = service.guidelines(session)
    service.save_guidelines(session, checked)
    if checked != before:
        audit.record(
            session, admin, "guidelines.edit", "guidelines", {"text": before}, {"text": checked}
        )
    return RedirectResponse("/guidelines", status_code=303)


def guidelines_text(text: str) -> str:
    """``text`` if it can be the guidelines; ValueError saying why not."""
    if not text.strip():
        raise ValueError("The guidelines are empty: labelers would get a blank page.")
    if len(text) > GUIDELINES_MAX_CHARS:
        raise ValueError(
            f"The guidelines are {len(text):,} characters long, more than the "
            f"{GUIDELINES_MAX_CHARS:,} they may be: nothing was saved."
        )
    try:
        return storable(text)
    except ValueError as error:
        raise ValueError(f"The guidelines {error}: nothing was saved.") from None


def _editor(
    request: Request, text: str, error: str | None = None, status_code: int = 200
) -> HTMLResponse:
    context = {"guidelines": text, "max_chars": GUIDELINES_MAX_CHARS, "error": error}
    return render(request, "guidelines_edit.html", context, status_code=status_code)
