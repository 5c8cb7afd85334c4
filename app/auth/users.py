"""Users: labelers and admins, with argon2-hashed passwords."""

import secrets
from collections.abc import Callable

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerifyMismatchError
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app import audit
from app.auth import throttle, tokens
from app.auth.names import clean_name
from app.models import Assignment, Role, User, utc_now

_hasher = PasswordHasher()


MIN_PASSWORD_LENGTH = 8
"""The least a password a person chooses may have (NIST SP 800-63B); generated ones are
longer (``new_password``)."""


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def check_password(password: str) -> None:
    """ValueError for a password too short to choose."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise ValueError(f"a password has at least {MIN_PASSWORD_LENGTH} characters")


def verify_password(password_hash: str | None, password: str) -> bool:
    if password_hash is None:
        return False
    try:
        return _hasher.verify(password_hash, password)
    except (VerifyMismatchError, InvalidHashError):
        return False


def new_password() -> str:
    """A random password that is easy to type: four groups of four letters and digits."""
    alphabet = "abcdefghijkmnpqrstuvwxyz23456789"
    return "-".join("".join(secrets.choice(alphabet) for _ in range(4)) for _ in range(4))


def create_user(
    session: Session,
    name: str,
    role: Role,
    password: str,
    *,
    approved: bool = False,
    actor: User | None = None,
) -> User:
    """A new active user (``clean_name``'s name), recorded as created by ``actor`` (None:
    the command line) in the audit log; raises ValueError if the name is taken, in any
    case, or not a name, or the password too short (``check_password``).

    Labelers start unapproved: they get the screening questions until an admin approves
    them. Admins need no approval.
    """
    name = clean_name(name)
    check_password(password)
    taken = next(
        (n for n in session.scalars(select(User.name)) if n.casefold() == name.casefold()), None
    )
    if taken is not None:
        same = (
            ""
            if taken == name
            else f" (as {taken!r}: two names must differ in more than letter case)"
        )
        raise ValueError(f"a user named {name!r} already exists{same}")
    user = User(
        name=name,
        role=role.value,
        password_hash=hash_password(password),
        is_approved=approved or role == Role.ADMIN,
    )
    session.add(user)
    session.flush()
    after = {"role": user.role, "is_approved": user.is_approved, "password": "set"}
    audit.record(session, actor, "user.create", f"user {user.name}", None, after)
    return user


def user_by_name(session: Session, name: str) -> User:
    """The user with this name; raises LookupError naming it otherwise."""
    user = session.scalar(select(User).where(User.name == name))
    if user is None:
        raise LookupError(f"there is no user named {name!r}")
    return user


def deactivate(session: Session, name: str, actor: User | None = None) -> User:
    """Deactivate a user; their open sessions end at their next request, and the leases of
    their open tasks now: another labeler may take each slot at once instead of waiting out
    a lease nobody will use (reactivated, they get the task back if it is still free).

    Their live API tokens are revoked (by ``actor``, for the audit log), not only refused
    while they are inactive: a user is often deactivated because a token leaked, and
    reactivating them must not bring it back."""
    user = end_sessions(session, name)
    user.is_active = False
    now = utc_now()
    tokens.revoke_user_tokens(session, user, actor, now)
    session.execute(
        update(Assignment)
        .where(
            Assignment.labeler_id == user.id,
            Assignment.completed_at.is_(None),
            Assignment.expires_at > now,
        )
        .values(expires_at=now)
    )
    session.flush()
    return user


def end_sessions(session: Session, name: str) -> User:
    """End every session the user has, at their next request (copies of a cookie too)."""
    user = user_by_name(session, name)
    user.session_version += 1
    session.flush()
    return user


def reactivate(session: Session, name: str) -> User:
    """Let a deactivated user log in again; the sessions they had stay ended."""
    user = user_by_name(session, name)
    user.is_active = True
    session.flush()
    return user


def approve(session: Session, name: str) -> User:
    """Open regular tasks to a labeler who passed screening."""
    user = user_by_name(session, name)
    user.is_approved = True
    session.flush()
    return user


def reset_password(session: Session, name: str, password: str) -> User:
    """Set a new password, end the user's open sessions and lift their login delays;
    ValueError for one too short (``check_password``)."""
    check_password(password)
    user = end_sessions(session, name)
    user.password_hash = hash_password(password)
    throttle.clear(session, name)
    session.flush()
    return user


USER_CHANGES: dict[str, tuple[Callable[..., User], tuple[str, ...]]] = {
    "user.approve": (approve, ("is_approved",)),
    "user.deactivate": (deactivate, ("is_active", "session_version")),
    "user.reactivate": (reactivate, ("is_active",)),
    "user.end_sessions": (end_sessions, ("session_version",)),
    "user.reset_password": (reset_password, ("session_version",)),
}
"""The admins' changes to a user, by audit action: the function and the fields it changes."""


def change_user(session: Session, actor: User | None, action: str, name: str, *args: str) -> User:
    """Apply an admin's change (USER_CHANGES) to the user ``name`` and record it in the audit
    log with the fields before and after (a new password as only "changed"); nothing is
    recorded where nothing changed (approving an approved user). LookupError for an unknown
    user, with nothing changed or recorded."""
    change, fields = USER_CHANGES[action]
    before = {field: getattr(user_by_name(session, name), field) for field in fields}
    # Deactivation revokes tokens, each an audit entry of its own by the same actor.
    given_actor = {"actor": actor} if change is deactivate else {}
    user = change(session, name, *args, **given_actor)
    after: dict[str, object] = {field: getattr(user, field) for field in fields}
    if action == "user.reset_password":
        after["password"] = "changed"
    if after != before:
        audit.record(session, actor, action, f"user {user.name}", before, after)
    return user


def list_users(session: Session) -> list[User]:
    return list(session.scalars(select(User).order_by(User.role, User.name)))
