"""Login throttling: counters of recent attempts, each with a growing delay once spent.

Three counters cover an attempt: its account from its address, its address (any account)
and its account (any address). Each lets a few attempts through, then makes the next one
wait, twice as long after each, up to MAX_DELAY. A delay, never a lock: every delay ends by
itself, and none that others cause holds an account's owner back. The account's own counter
slows guessing from many addresses, but its delay holds back only addresses that have
failed at the account: the owner, from an address that has not, always gets their attempt,
however many addresses are failing their password (OWASP prefers delays by address, and by
address and account, to locking accounts). Someone failing the password therefore slows
their own address, and addresses that already failed at the account.

An attempt is counted before its password is checked, in a transaction of its own that
commits at once: concurrent guesses see each other's counts and can never check more
passwords than the counters allow. A successful login gives its attempt back and forgets
the account's failures from its address, and only those: other addresses' counts stand.
"""

import ipaddress
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, Engine, case, delete, select, update
from sqlalchemy.orm import Session

from app.core.statements import INSERTS
from app.models import LOGIN_THROTTLES as _THROTTLES

FREE_FROM_ONE_ADDRESS = 5
"""Attempts at one account from one address before the delays start."""
FREE_PER_ADDRESS = 20
"""Attempts at any accounts from one address before the delays start."""
FREE_PER_ACCOUNT = 50
"""Attempts at one account from any addresses before the delays start for the addresses
that failed at it."""
FIRST_DELAY = timedelta(seconds=30)
MAX_DELAY = timedelta(minutes=15)
FORGET_AFTER = timedelta(hours=1)
"""A counter without attempts for this long starts over (longer than MAX_DELAY, so that
waiting out the delays does not reset them)."""

ANY = ""
"""The name or address of a counter that covers every name or address."""


@dataclass(frozen=True)
class Counter:
    name: str
    address: str
    free: int
    """Attempts allowed before each next one waits."""

    @property
    def is_account_wide(self) -> bool:
        """Counts attempts at one account from any address."""
        return self.address == ANY

    @property
    def is_pair(self) -> bool:
        """Counts attempts at one account from one address."""
        return ANY not in (self.name, self.address)


def counted_address(address: str) -> str:
    """The address a counter counts by: an IPv6 address's /64 network, as a host is given
    a whole /64 and would otherwise be a new guesser at each of its addresses; IPv4 (also
    as IPv6 writes it, ``::ffff:192.0.2.1``) and anything else as it is."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address  # "unknown": no client address at all
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def counters_of(name: str, address: str) -> list[Counter]:
    """The counters a login attempt falls under, in the order their rows are locked."""
    address = counted_address(address)
    counters = [
        Counter(name, address, FREE_FROM_ONE_ADDRESS),
        Counter(ANY, address, FREE_PER_ADDRESS),
        Counter(name, ANY, FREE_PER_ACCOUNT),
    ]
    # One order for every transaction, so that two of them never wait on each other's rows.
    return sorted(counters, key=lambda counter: (counter.name, counter.address))


def delay_after(attempts: int, free: int) -> timedelta | None:
    """How long the attempt after ``attempts`` waits: nothing while free ones are left,
    then FIRST_DELAY, doubled for every further attempt, up to MAX_DELAY."""
    if attempts < free:
        return None
    doubled: timedelta = FIRST_DELAY * 2 ** min(attempts - free, 16)
    return min(doubled, MAX_DELAY)


def take_attempt(engine: Engine, name: str, address: str, now: datetime) -> datetime | None:
    """Count a login attempt, committed at once; None if it may go ahead, else the time it
    must wait until (nothing is counted then)."""
    with engine.begin() as connection:
        connection.execute(
            delete(_THROTTLES).where(_THROTTLES.c.last_attempt_at < now - FORGET_AFTER)
        )
    with engine.begin() as connection:
        counters = counters_of(name, address)
        rows = [_locked(connection, counter, now) for counter in counters]
        # Failed at the account from here (or an attempt from here is under way): only
        # then does the account's delay apply, so that one from a new address goes through.
        tried_here = any(
            attempts > 0
            for counter, (attempts, _) in zip(counters, rows, strict=True)
            if counter.is_pair
        )
        waits = [
            until
            for counter, (_, until) in zip(counters, rows, strict=True)
            if until is not None and until > now and (tried_here or not counter.is_account_wide)
        ]
        if waits:
            return max(waits)
        for counter, (attempts, _) in zip(counters, rows, strict=True):
            delay = delay_after(attempts + 1, counter.free)
            connection.execute(
                update(_THROTTLES)
                .where(_THROTTLES.c.name == counter.name, _THROTTLES.c.address == counter.address)
                .values(
                    attempts=attempts + 1,
                    last_attempt_at=now,
                    blocked_until=None if delay is None else now + delay,
                )
            )
    return None


def _locked(connection: Connection, counter: Counter, now: datetime) -> tuple[int, datetime | None]:
    """The counter's attempts and delay, its row made if new and locked (Postgres; SQLite's
    writers take turns by their whole transaction) until the transaction ends."""
    connection.execute(
        INSERTS[connection.dialect.name](_THROTTLES)
        .values(name=counter.name, address=counter.address, attempts=0, last_attempt_at=now)
        .on_conflict_do_nothing()
    )
    row = connection.execute(
        select(_THROTTLES.c.attempts, _THROTTLES.c.blocked_until)
        .where(_THROTTLES.c.name == counter.name, _THROTTLES.c.address == counter.address)
        .with_for_update()
    ).one()
    return row.attempts, row.blocked_until


def give_back(session: Session, name: str, address: str) -> None:
    """After a successful login: forget the account's failures from this address (its
    owner just proved the password here) and return the attempt to the address's and the
    account's counters, where others' failures still count."""
    for counter in counters_of(name, address):  # in the order take_attempt locks them
        row = (_THROTTLES.c.name == counter.name, _THROTTLES.c.address == counter.address)
        if counter.is_pair:
            session.execute(delete(_THROTTLES).where(*row))
            continue
        attempts = _THROTTLES.c.attempts - 1
        session.execute(
            update(_THROTTLES)
            .where(*row)
            .values(
                attempts=attempts,
                blocked_until=case((attempts >= counter.free, _THROTTLES.c.blocked_until)),
            )
        )


def clear(session: Session, name: str) -> None:
    """Lift every delay on the account, from every address (an admin reset its password)."""
    session.execute(delete(_THROTTLES).where(_THROTTLES.c.name == name))
