"""API tokens: made by an admin for a user, shown once, kept as a SHA-256, revocable.

A token is 256 random bits, so a plain SHA-256 is enough to keep it (no salt or slow
hash: nobody can guess through the hash's input space) and lets a request find its row by
an indexed lookup. What a token may do is its scopes, bounded by its user's role: a
labeler's token can do nothing an admin's page would refuse the labeler.
"""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from app import audit
from app.auth.names import clean_name
from app.models import ApiToken, Role, TokenScope, User, utc_now

TOKEN_PREFIX = "slt_"
SHOWN_PREFIX_CHARS = 10
"""How much of a token the Users page shows, to tell tokens apart (the random part is 43)."""
TOUCH_AFTER = timedelta(minutes=1)
"""``last_used_at`` is written at most this often per token: not a write per request."""

ADMIN_ONLY_SCOPES = frozenset(TokenScope)
"""What only an admin may do: every scope, as the Imports page, its job statuses and the
export are admins' alone. A labeler's token could do nothing, so none is made; one whose
admin became a labeler is refused everything but ``/me`` and the schema."""


class TokenError(ValueError):
    """A token cannot be made or changed as asked; the message says why."""


@dataclass(frozen=True)
class TokenHolder:
    """Who a valid token speaks for, and what it may do."""

    token_id: int
    user_id: int
    user_name: str
    role: str
    scopes: frozenset[TokenScope]

    def may(self, scope: TokenScope) -> bool:
        """Whether the token has ``scope`` and its user's role allows it."""
        return scope in self.scopes and scope_allowed(self.role, scope)


def scope_allowed(role: str, scope: TokenScope) -> bool:
    return role == Role.ADMIN.value or scope not in ADMIN_ONLY_SCOPES


def parse_scopes(text: str) -> frozenset[TokenScope]:
    """``import,export`` as scopes; TokenError naming an unknown one, or none at all."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    known = {scope.value for scope in TokenScope}
    unknown = [name for name in names if name not in known]
    if unknown:
        choices = ", ".join(scope.value for scope in TokenScope)
        raise TokenError(f"unknown scope {', '.join(map(repr, unknown))}: choose from {choices}")
    if not names:
        raise TokenError("give the token at least one scope (import, export, read)")
    return frozenset(TokenScope(name) for name in names)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def create_token(
    session: Session,
    user: User,
    name: str,
    scopes: frozenset[TokenScope],
    *,
    created_by: User | None = None,
    expires_at: datetime | None = None,
    now: datetime | None = None,
) -> tuple[ApiToken, str]:
    """A new token for ``user`` (flushed) and its secret, which is not kept anywhere."""
    if not name.strip():
        raise TokenError("give the token a name: what it is for, e.g. 'pipeline'")
    name = clean_name(name)
    refused = sorted(scope.value for scope in scopes if not scope_allowed(user.role, scope))
    if refused:
        raise TokenError(
            f"{user.name} is a {user.role}: a {user.role}'s token cannot have "
            f"{', '.join(refused)} (only admins import, export and read job statuses)"
        )
    if not user.is_active:
        raise TokenError(f"{user.name} is deactivated: reactivate them first")
    if expires_at is not None and expires_at <= (now or utc_now()):
        raise TokenError("the expiry must be in the future")
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken(
        user_id=user.id,
        name=name,
        token_hash=hash_token(secret),
        prefix=secret[:SHOWN_PREFIX_CHARS],
        scopes=",".join(sorted(scope.value for scope in scopes)),
        created_by_id=created_by.id if created_by else None,
        expires_at=expires_at,
    )
    session.add(token)
    session.flush()
    audit.record(
        session,
        created_by,
        "token.create",
        f"token {token.id} {token.name!r} for {user.name}",
        after={
            "scopes": token.scopes,
            "expires_at": None if expires_at is None else expires_at.isoformat(),
        },
    )
    return token, secret


MAX_DAYS = 3650
"""The longest a token may be made to last, when it expires at all (ten years)."""


def expiry_in(days: int | None, now: datetime | None = None) -> datetime | None:
    """When a token made now for ``days`` days expires (None: never); TokenError past
    MAX_DAYS or below one."""
    if days is None:
        return None
    if not 1 <= days <= MAX_DAYS:
        raise TokenError(f"a token lasts from 1 to {MAX_DAYS:,} days, not {days:,}")
    return (now or utc_now()) + timedelta(days=days)


@dataclass(frozen=True)
class Revocation:
    """A revoked token, and whether this call revoked it (False: it was revoked before)."""

    token: ApiToken
    now_revoked: bool

    def describe(self) -> str:
        """What an admin reads: said apart, so that a repeated revoke does not claim a change."""
        name = f"API token {self.token.id} {self.token.name!r}"
        if self.now_revoked:
            return f"{name} revoked: refused from its next request on."
        assert self.token.revoked_at is not None
        return f"{name} was already revoked on {self.token.revoked_at:%Y-%m-%d %H:%M} UTC."


def revoke_token(
    session: Session,
    token_id: int,
    actor: User | None = None,
    now: datetime | None = None,
) -> Revocation:
    """Revoke a token: refused from its next request on. LookupError if there is none;
    revoking a revoked token changes nothing (and records nothing).

    ``actor`` is who revoked it, for the audit log (None: the command line)."""
    token = session.get(ApiToken, token_id)
    if token is None:
        raise LookupError(f"there is no API token {token_id}")
    if token.revoked_at is not None:
        return Revocation(token, now_revoked=False)
    token.revoked_at = now or utc_now()
    session.flush()
    audit.record(
        session,
        actor,
        "token.revoke",
        f"token {token.id} {token.name!r}",
        before={"revoked": False},
        after={"revoked": True},
    )
    return Revocation(token, now_revoked=True)


def revoke_user_tokens(
    session: Session, user: User, actor: User | None = None, now: datetime | None = None
) -> list[Revocation]:
    """Revoke every live token of ``user`` (not revoked, not expired), each recorded as
    ``revoke_token`` records it; an expired token stays expired, refused already."""
    now = now or utc_now()
    live = session.scalars(
        select(ApiToken.id)
        .where(
            ApiToken.user_id == user.id,
            ApiToken.revoked_at.is_(None),
            or_(ApiToken.expires_at.is_(None), ApiToken.expires_at > now),
        )
        .order_by(ApiToken.id)
    ).all()
    return [revoke_token(session, token_id, actor, now) for token_id in live]


def token_holder(session: Session, secret: str, now: datetime | None = None) -> TokenHolder | None:
    """The holder of a live token (not revoked, not expired, its user active), else None.

    Notes the token's use, at most every TOUCH_AFTER.
    """
    now = now or utc_now()
    row = session.execute(
        select(ApiToken, User)
        .join(User, User.id == ApiToken.user_id)
        .where(ApiToken.token_hash == hash_token(secret))
    ).first()
    if row is None:
        return None
    token, user = row
    if token.revoked_at is not None or not user.is_active:
        return None
    if token.expires_at is not None and token.expires_at <= now:
        return None
    if token.last_used_at is None or now - token.last_used_at >= TOUCH_AFTER:
        session.execute(update(ApiToken).where(ApiToken.id == token.id).values(last_used_at=now))
    scopes = frozenset(TokenScope(name) for name in token.scopes.split(",") if name)
    return TokenHolder(token.id, user.id, user.name, user.role, scopes)


@dataclass(frozen=True)
class TokenView:
    """A token as the Users page and ``steplabel tokens list`` show it."""

    token: ApiToken
    user_name: str
    user_active: bool = True

    @property
    def state(self) -> str:
        """As ``token_holder`` judges it. Deactivation revokes a user's tokens; "user
        deactivated" is a token of a user deactivated before it did: refused while they
        are inactive, and it may still be revoked."""
        if self.token.revoked_at is not None:
            return "revoked"
        if self.token.expires_at is not None and self.token.expires_at <= utc_now():
            return "expired"
        return "active" if self.user_active else "user deactivated"

    @property
    def revocable(self) -> bool:
        return self.state in ("active", "user deactivated")


def list_tokens(session: Session) -> list[TokenView]:
    rows = session.execute(
        select(ApiToken, User.name, User.is_active)
        .join(User, User.id == ApiToken.user_id)
        .order_by(ApiToken.id)
    ).all()
    return [TokenView(token, name, active) for token, name, active in rows]


def sole_admin(session: Session) -> User:
    """The one active admin, whom a token is for when none is named; LookupError otherwise."""
    admins = list(
        session.scalars(
            select(User).where(User.role == Role.ADMIN.value, User.is_active.is_(True)).limit(2)
        )
    )
    if len(admins) != 1:
        found = "there is no active admin" if not admins else "there are several admins"
        raise LookupError(f"{found}: name the token's user with --user")
    return admins[0]
