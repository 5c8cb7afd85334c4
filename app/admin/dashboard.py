"""What the admin screens (app/admin/routes/) share: the whole page or its live block, a
form's answer, the project's runtime settings, and the checks of path and form values.

Pages answer htmx requests with their live block (figures refresh every 30 seconds, and at
once after an admin's change: successful POSTs send the ``dashboard-refresh`` event).
Forms post with htmx and get back a fragment, a result or the form with its errors (422);
without JavaScript they get the whole page with the same result.
"""

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import HTTPException, Query, Request
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from app.admin import charts
from app.core.config import get_settings
from app.inputs import INTEGER_MAX, PageNumber
from app.project_settings import runtime_settings
from app.templating import render, wants_fragment

REFRESH = {"HX-Trigger": "dashboard-refresh"}
"""Sent with a successful change: the page's live blocks reload at once."""
NO_STORE = {"Cache-Control": "no-store"}
"""Sent with a new password: no cache keeps it."""

Context = Callable[[], dict[str, Any]]
Row = TypeVar("Row")


def runtime_values(session: Session) -> dict[str, Any]:
    return runtime_settings(session.connection(), get_settings())


def threshold(session: Session) -> float:
    """The share of gold step ratings a labeler must match to pass screening and QC."""
    return float(runtime_values(session)["screening_threshold"])


def min_answers(session: Session) -> int:
    """The QC answers a labeler needs before QC gives a verdict."""
    return int(runtime_values(session)["qc_min_answers"])


def default_overlap(session: Session) -> int:
    """Labelers per solution, where a solution does not set its own."""
    return int(runtime_values(session)["overlap"])


def live_page(
    request: Request, template: str, context: dict[str, Any], live_block: str
) -> HTMLResponse:
    """The whole page, or its ``live_block`` for htmx's refresh."""
    block = live_block if wants_fragment(request) else None
    return render(request, template, {"charts": charts, **context}, block=block)


def form_answer(
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


Page = Annotated[PageNumber, Query()]


def row_or_404(session: Session, table: type[Row], key: int, noun: str) -> Row:
    row = session.get(table, key)
    if row is None:
        raise HTTPException(404, f"There is no {noun} {key}.")
    return row


def whole_number(text: str, name: str, minimum: int = 1) -> int:
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
