"""Logins, signed session cookies, CSRF tokens, and the user dependencies routes rely on.

The session cookie (Starlette's SessionMiddleware, signed with the project's secret) holds
the user's id, their ``session_version`` and a CSRF token. Logging out, a password reset,
deactivation or an admin's "end sessions" bump the version, which ends every session the
user has, copies of the cookie included, at their next request.
"""

import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from sqlalchemy import Connection, Engine, and_, bindparam, select, update
from sqlalchemy.orm import Session

from app.auth import throttle
from app.auth.users import hash_password, verify_password
from app.core.db import DbSession
from app.core.statements import AnyRow
from app.models import USERS, Role, User, utc_now


@dataclass(frozen=True)
class Viewer:
    """The logged-in user as a plain copy: the page header, and the labeling requests."""

    id: int
    name: str
    role: str
    is_approved: bool


class LoginThrottled(Exception):
    """Too many recent attempts for this account or address: the next waits until ``until``."""

    def __init__(self, until: datetime) -> None:
        super().__init__(until)
        self.until = until


def authenticate(
    session: Session, name: str, password: str, address: str, now: datetime | None = None
) -> User | None:
    """The active user with this name and password, else None; LoginThrottled when the
    attempt must wait (app/auth/throttle.py).

    Call it before ``session`` runs its first statement: on SQLite the session's
    transaction holds the write lock that counting the attempt needs.
    """
    if not name:
        return None
    # Counted in a transaction of its own, committed before the slow password check, so
    # that concurrent guesses count each other (the request's session commits too late).
    until = throttle.take_attempt(_engine_of(session), name, address, now or utc_now())
    if until is not None:
        raise LoginThrottled(until)
    user = session.scalar(select(User).where(User.name == name, User.is_active.is_(True)))
    # Hash even for unknown names so that timing does not tell which names exist.
    hash_to_check = user.password_hash if user else _DUMMY_HASH
    if verify_password(hash_to_check, password) and user is not None:
        throttle.give_back(session, name, address)
        return user
    return None


def _engine_of(session: Session) -> Engine:
    bind = session.get_bind()
    return bind if isinstance(bind, Engine) else bind.engine


# Checked against for unknown names, so that they cost as much time as known ones.
_DUMMY_HASH = hash_password(secrets.token_hex(16))


def log_in(request: Request, user: User) -> None:
    request.session.clear()
    request.session.update(
        {
            "user_id": user.id,
            "version": user.session_version,
            "csrf": secrets.token_urlsafe(32),
            # For the body size limit, which runs before any database work (a role is set
            # when the account is made, so the cookie's copy cannot go stale).
            "admin": user.role == Role.ADMIN.value,
        }
    )


def log_out(request: Request, session: Session) -> None:
    """End the login, and with it every copy of its cookie (and the user's other logins:
    the cookie is signed, not stored, so only the user's session version can revoke it)."""
    user_id = request.session.get("user_id")
    version = request.session.get("version")
    if isinstance(user_id, int) and isinstance(version, int):
        session.execute(
            update(User)
            .where(User.id == user_id, User.session_version == version)
            .values(session_version=User.session_version + 1)
        )
    request.session.clear()


def current_user_or_none(request: Request, session: DbSession) -> User | None:
    user_id = request.session.get("user_id")
    if not isinstance(user_id, int):
        return None
    user = session.get(User, user_id)
    if user is None or not user.is_active or user.session_version != request.session.get("version"):
        request.session.clear()
        return None
    # A plain copy for the page header: error pages render after the session has closed.
    request.state.viewer = Viewer(user.id, user.name, user.role, user.is_approved)
    return user


@dataclass(frozen=True)
class Login:
    """Who the session cookie says is logged in, not yet checked against the database."""

    user_id: int
    version: int
    session: dict[str, Any]
    """The request's session, forgotten when the login turns out to have ended."""


async def login_of(request: Request) -> Login:
    """Dependency (no database): the session's login; 401 when there is none.

    The labeling requests check it with ``check_login`` in the same thread and transaction
    as the rest of their work, instead of in a dependency of its own.
    """
    user_id = request.session.get("user_id")
    version = request.session.get("version")
    if not isinstance(user_id, int) or not isinstance(version, int):
        raise HTTPException(401, "Please log in.")
    return Login(user_id, version, request.session)


LOGIN_COLUMNS = (
    USERS.c.id.label("user_id"),
    USERS.c.name.label("user_name"),
    USERS.c.role,
    USERS.c.is_approved,
    USERS.c.session_version,
)
"""What ``viewer_of`` reads. A request's first query can select these beside what it
fetches, from the users row that ``LOGIN_USER`` finds, and check the login for free."""
LOGIN_USER = and_(USERS.c.id == bindparam("user_id"), USERS.c.is_active.is_(True))
_ACTIVE_USER = select(*LOGIN_COLUMNS).where(LOGIN_USER)


def check_login(connection: Connection, login: Login) -> Viewer:
    """The user behind ``login`` if they are still active and the login still stands.

    401 otherwise (the session is forgotten): deactivating a user or resetting their
    password ends every session they have at their next request.
    """
    row = connection.execute(_ACTIVE_USER, {"user_id": login.user_id}).first()
    return viewer_of(row, login)


def viewer_of(row: AnyRow | None, login: Login) -> Viewer:
    """The Viewer in a row of LOGIN_COLUMNS (None: no active user); 401 as check_login."""
    if row is None or row.session_version != login.version:
        login.session.clear()
        raise HTTPException(401, "Please log in.")
    return Viewer(row.user_id, row.user_name, row.role, row.is_approved)


# The two below do no I/O: as coroutines they run on the event loop, not in a thread.
async def current_user(user: Annotated[User | None, Depends(current_user_or_none)]) -> User:
    """Dependency: the logged-in user; 401 (a redirect to the login page for pages)."""
    if user is None:
        raise HTTPException(401, "Please log in.")
    return user


async def current_admin(user: Annotated[User, Depends(current_user)]) -> User:
    """Dependency: the logged-in admin; 403 for anyone else."""
    if user.role != Role.ADMIN.value:
        raise HTTPException(403, "This page is for admins.")
    return user


CurrentUser = Annotated[User, Depends(current_user)]
CurrentAdmin = Annotated[User, Depends(current_admin)]
LoggedIn = Annotated[Login, Depends(login_of)]
