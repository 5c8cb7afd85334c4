"""The Users screen: accounts, their changes (approve, deactivate, reset a password, ...)
and API tokens."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from app.admin import dashboard, people
from app.auth import tokens as api_tokens
from app.auth import users
from app.auth.sessions import CurrentAdmin
from app.core.db import DbSession
from app.inputs import DbId, Text
from app.models import TokenScope, User

pages = APIRouter()


@pages.get("/users", response_class=HTMLResponse)
def users_page(request: Request, session: DbSession) -> HTMLResponse:
    return dashboard.live_page(request, "admin/users.html", _users_context(session), "user_table")


def _users_context(session: Session) -> dict[str, Any]:
    threshold = dashboard.threshold(session)
    return {
        "section": "users",
        "threshold": threshold,
        "people": people.people(session, threshold),
        "api_tokens": api_tokens.list_tokens(session),
        "token_scopes": [scope.value for scope in TokenScope],
    }


def existing_user(user_id: DbId, session: DbSession) -> User:
    """Dependency: the user named in the path, or 404."""
    return dashboard.row_or_404(session, User, user_id, "user")


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
        user, password = people.create_account(session, name, role, approved=approved, admin=admin)
    except ValueError as error:
        return _users_answer(
            request, session, {"error": str(error), "entered": {"name": name, "role": role}}
        )
    outcome = {"message": f"Created {user.role} {user.name}.", "password_for": user.name}
    return _users_answer(request, session, {**outcome, "password": password}, dashboard.NO_STORE)


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
        "{name} is deactivated and logged out at their next request; their API tokens are revoked.",
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
    return _users_answer(request, session, outcome, dashboard.NO_STORE)


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
        owner = session.get(User, dashboard.whole_number(user_id, "user"))
        if owner is None:
            raise ValueError("choose the token's user")
        days = (
            dashboard.whole_number(expires_days, "expires in days")
            if expires_days.strip()
            else None
        )
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
    return _users_answer(request, session, outcome, dashboard.NO_STORE)


@pages.post("/tokens/{token_id}/revoke", response_class=HTMLResponse)
def revoke_token(
    request: Request, session: DbSession, admin: CurrentAdmin, token_id: DbId
) -> HTMLResponse:
    try:
        revocation = api_tokens.revoke_token(session, token_id, admin)
    except LookupError:
        raise HTTPException(404, f"There is no API token {token_id}.") from None
    return _users_answer(request, session, {"message": revocation.describe()})


def _users_answer(
    request: Request,
    session: Session,
    outcome: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> HTMLResponse:
    return dashboard.form_answer(
        request,
        "admin/users.html",
        lambda: _users_context(session),
        outcome,
        failed="error" in outcome,
        headers=headers,
    )
